// libFuzzer target for gzip-compressed IDX files (load_idx). The first input byte picks a mode:
// below 0x80 the rest is an IDX file that this target gzips first, so mutations reach the
// header checks and the bounded inflation through valid streams (data shorter or longer than
// the header says, several members); from 0x80 the rest is taken as the compressed file itself,
// so mutations also reach broken streams, CRCs and trailers.
#include <zlib.h>

#include <string>

#include "fuzz_util.h"
#include "io/parsers.h"

namespace {
std::string gzip(std::string_view in) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) __builtin_trap();
  std::string out(deflateBound(&z, static_cast<uLong>(in.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) __builtin_trap();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view rest = spmd::fuzz::bytes(data + 1, size - 1);
  std::string file = data[0] < 0x80 ? gzip(rest) : std::string(rest);
  return spmd::fuzz::run([&] { spmd::fuzz::use(spmd::io::parse_idx(file, "fuzz.idx.gz")); });
}
