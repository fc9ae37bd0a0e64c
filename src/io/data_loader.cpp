// The data loader (include/spmd/data.h): samples read straight out of memory-mapped IDX and .npy
// files (or arrays in memory), an epoch order that is a pure function of (seed, epoch), each
// process's rows of each global batch assembled on a background thread into a bounded queue,
// and the global batch laid out on a mesh by make_array_from_process_local_data.
//
// The thread only reads the sources and makes host arrays; everything that talks to the other
// processes (make_array_from_process_local_data in next()) runs on the caller's thread, in the
// caller's order, as collectives must.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "base/checked_size.h"
#include "core/array_impl.h"
#include "io/file.h"
#include "io/parsers.h"
#include "spmd/data.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/topology.h"

namespace spmd::data {

// ---- sources ------------------------------------------------------------------------------------

struct ArraySource::Impl {
  std::string name;
  DType dtype = DType::Float32;
  Shape sample_shape;
  int64_t sample_elems = 1;
  int64_t total = 0;  // samples stored (first() views keep it: Fortran order strides by it)
  // Where the bytes are: a mapped file, a gzip IDX file inflated, or an array in memory.
  std::unique_ptr<io::MappedFile> file;
  std::string inflated;
  Array array;
  std::function<void(int64_t, void*)> callback;
  const unsigned char* base = nullptr;  // the first stored element
  // How a stored element becomes one of dtype: copied (bools normalised to 0/1), its bytes
  // reversed in parts of swap_width (big-endian .npy), or an IDX element decoded.
  enum class Encoding { Native, Swapped, Idx } encoding = Encoding::Native;
  int stored_width = 0;  // bytes per stored element
  int swap_width = 0;
  int idx_type = 0;
  bool fortran = false;          // .npy in Fortran order: the sample axis varies fastest
  std::vector<int64_t> fstride;  // Fortran order: each sample dimension's stride in elements

  void decode(const unsigned char* src, int64_t n, unsigned char* out) const {
    const size_t count = static_cast<size_t>(n);
    switch (encoding) {
      case Encoding::Native:
        std::memcpy(out, src, count * static_cast<size_t>(stored_width));
        if (dtype == DType::Bool)
          for (size_t k = 0; k < count; ++k) out[k] = out[k] != 0;
        return;
      case Encoding::Swapped: {
        const size_t bytes = count * static_cast<size_t>(stored_width);
        const auto w = static_cast<size_t>(swap_width);
        for (size_t at = 0; at < bytes; at += w)
          for (size_t b = 0; b < w; ++b) out[at + b] = src[at + w - 1 - b];
        return;
      }
      case Encoding::Idx:
        io::decode_idx(src, count, idx_type, out);
        return;
    }
  }

  void copy_elements(int64_t i, int64_t start, int64_t n, unsigned char* out) const {
    if (n <= 0) return;
    if (callback) {
      if (start == 0 && n == sample_elems) return callback(i, out);
      const auto item = static_cast<size_t>(itemsize(dtype));
      std::vector<unsigned char> whole(static_cast<size_t>(sample_elems) * item);
      callback(i, whole.data());
      std::memcpy(out, whole.data() + static_cast<size_t>(start) * item,
                  static_cast<size_t>(n) * item);
      return;
    }
    const auto width = static_cast<size_t>(stored_width);
    if (!fortran) {
      decode(base + static_cast<size_t>(i * sample_elems + start) * width, n, out);
      return;
    }
    // Element (i, k1, ..., kr) lies at i + total * (k1 * fstride[0] + ...): element by element.
    const auto item = static_cast<size_t>(itemsize(dtype));
    const size_t r = sample_shape.size();
    for (int64_t e = start; e < start + n; ++e) {
      int64_t rest = e, offset = 0;
      for (size_t d = r; d-- > 0;) {
        offset += rest % sample_shape[d] * fstride[d];
        rest /= sample_shape[d];
      }
      decode(base + static_cast<size_t>(i + total * offset) * width, 1,
             out + static_cast<size_t>(e - start) * item);
    }
  }

  void set_shape(const Shape& shape) {
    if (shape.empty())
      fail("data::ArraySource(", name,
           "): expected an array with a leading sample axis, got shape ()");
    total = shape[0];
    sample_shape.assign(shape.begin() + 1, shape.end());
    sample_elems = shape_size(sample_shape);
  }
};

ArraySource::ArraySource(const std::string& path) {
  auto impl = std::make_shared<Impl>();
  impl->name = path;
  impl->file = std::make_unique<io::MappedFile>(path, "data::ArraySource");
  std::string_view bytes = impl->file->bytes();
  const bool npy = bytes.substr(0, 6) == std::string_view("\x93NUMPY", 6);
  if (npy) {
    const io::NpyLayout layout = io::npy_layout(bytes, path);
    Shape shape = layout.shape;  // as stored: reversed for Fortran order
    if (layout.fortran) std::reverse(shape.begin(), shape.end());
    impl->dtype = layout.dtype;
    impl->set_shape(shape);
    impl->base = reinterpret_cast<const unsigned char*>(bytes.data() + layout.data_offset);
    impl->stored_width = itemsize(layout.dtype);
    if (layout.swap) {
      impl->encoding = Impl::Encoding::Swapped;
      impl->swap_width = is_complex(layout.dtype) ? impl->stored_width / 2 : impl->stored_width;
    }
    impl->fortran = layout.fortran && impl->sample_shape.size() > 0;
    if (impl->fortran) {
      impl->fstride.assign(impl->sample_shape.size(), 1);
      for (size_t d = 1; d < impl->sample_shape.size(); ++d)
        impl->fstride[d] = impl->fstride[d - 1] * impl->sample_shape[d - 1];
    }
  } else {
    const bool gz = bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f &&
                    static_cast<uint8_t>(bytes[1]) == 0x8b;
    if (gz) {
      // Compressed data cannot be read in place: the stored bytes, inflated once.
      impl->inflated = io::inflate_idx(bytes, path);
      impl->file.reset();
      bytes = impl->inflated;
    }
    const io::IdxLayout layout = io::idx_layout(bytes, path);
    impl->dtype = layout.dtype;
    impl->set_shape(layout.shape);
    impl->base = reinterpret_cast<const unsigned char*>(bytes.data() + layout.data_offset);
    impl->encoding = Impl::Encoding::Idx;
    impl->stored_width = layout.width;
    impl->idx_type = layout.type;
  }
  count_ = impl->total;
  impl_ = std::move(impl);
}

ArraySource::ArraySource(const Array& samples) {
  auto impl = std::make_shared<Impl>();
  impl->name = "<array>";
  impl->dtype = samples.dtype();
  impl->set_shape(samples.shape());
  impl->array = samples;
  impl->base = static_cast<const unsigned char*>(samples.data());  // throws unless concrete
  impl->stored_width = itemsize(samples.dtype());
  count_ = impl->total;
  impl_ = std::move(impl);
}

ArraySource::ArraySource(DType dtype, Shape sample_shape, int64_t size,
                         std::function<void(int64_t, void*)> read, std::string name) {
  auto impl = std::make_shared<Impl>();
  impl->name = std::move(name);
  if (size < 0) fail("data::ArraySource(", impl->name, "): expected size >= 0, got ", size);
  if (!read) fail("data::ArraySource(", impl->name, "): expected a read function, got none");
  sample_shape.insert(sample_shape.begin(), size);
  detail::checked_byte_count(sample_shape, dtype, "data::ArraySource");
  impl->dtype = dtype;
  impl->set_shape(sample_shape);
  impl->callback = std::move(read);
  impl->stored_width = itemsize(dtype);
  count_ = impl->total;
  impl_ = std::move(impl);
}

DType ArraySource::dtype() const { return impl_->dtype; }
const Shape& ArraySource::sample_shape() const { return impl_->sample_shape; }
const std::string& ArraySource::name() const { return impl_->name; }

ArraySource ArraySource::first(int64_t n) const {
  if (n < 0 || n > count_)
    fail("data::ArraySource::first(", n, "): ", impl_->name, " holds ", count_,
         " samples; expected 0 <= n <= ", count_);
  ArraySource s = *this;
  s.count_ = n;
  return s;
}

void ArraySource::copy_elements(int64_t i, int64_t start, int64_t count, void* out) const {
  if (i < 0 || i >= count_)
    fail("data::ArraySource(", impl_->name, "): sample ", i, " is out of range for ", count_,
         " samples");
  if (start < 0 || count < 0 || start > impl_->sample_elems - count)
    fail("data::ArraySource(", impl_->name, "): elements [", start, ", ", start + count,
         ") are out of range for a sample of ", impl_->sample_elems);
  impl_->copy_elements(i, start, count, static_cast<unsigned char*>(out));
}

void ArraySource::copy(int64_t i, void* out) const {
  copy_elements(i, 0, impl_->sample_elems, out);
}

Array ArraySource::read(int64_t i) const {
  Array a = detail::make_array(AbstractValue{impl_->sample_shape, impl_->dtype, false});
  if (a.nbytes() == 0) {
    copy_elements(i, 0, 0, nullptr);  // the range check
    return a;
  }
  copy(i, a.impl()->data());
  return a;
}

// ---- the epoch's order --------------------------------------------------------------------------

namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return mix64(state_);
  }
  // Uniform in [0, bound) (bound >= 1), Lemire's multiply-and-reject.
  uint64_t below(uint64_t bound) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * bound;
    auto low = static_cast<uint64_t>(m);
    if (low < bound) {
      const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  if (n < 0) fail("data::epoch_permutation: expected n >= 0, got ", n);
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
  SplitMix64 rng(seed ^ mix64(static_cast<uint64_t>(epoch)));
  for (int64_t i = n - 1; i >= 1; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

// ---- the loader ---------------------------------------------------------------------------------

namespace {

// What this process reads of one source in a batch of a given size: the box [lo, hi) of the
// (batch, sample...) array, and the box's sample part as runs of consecutive elements
// (start, count) within a sample.
struct Part {
  Shape lo, hi, local_shape;
  std::vector<std::pair<int64_t, int64_t>> runs;
};

Part part_of(const Shape& sample, Shape lo, Shape hi) {
  Part p;
  p.local_shape.resize(lo.size());
  for (size_t d = 0; d < lo.size(); ++d) p.local_shape[d] = hi[d] - lo[d];
  p.lo = std::move(lo);
  p.hi = std::move(hi);
  const size_t r = sample.size();
  for (size_t d = 0; d < r; ++d)
    if (p.hi[d + 1] <= p.lo[d + 1]) return p;  // an empty box: nothing to read
  if (r == 0) {
    p.runs.emplace_back(0, 1);
    return p;
  }
  // Strides in elements; the trailing dimensions the box covers whole make one run with the
  // innermost dimension it cuts.
  std::vector<int64_t> stride(r, 1);
  for (size_t d = r - 1; d-- > 0;) stride[d] = stride[d + 1] * sample[d + 1];
  size_t cut = r - 1;
  int64_t inner = 1;
  while (true) {
    const bool whole = p.lo[cut + 1] == 0 && p.hi[cut + 1] == sample[cut];
    if (!whole || cut == 0) break;
    inner *= sample[cut];
    --cut;
  }
  const int64_t run = (p.hi[cut + 1] - p.lo[cut + 1]) * inner;
  // Every position of the dimensions before `cut` inside the box, the last fastest.
  std::vector<int64_t> at(cut);
  for (size_t d = 0; d < cut; ++d) at[d] = p.lo[d + 1];
  while (true) {
    int64_t start = p.lo[cut + 1] * stride[cut];
    for (size_t d = 0; d < cut; ++d) start += at[d] * stride[d];
    p.runs.emplace_back(start, run);
    size_t d = cut;
    for (; d > 0; --d) {
      if (++at[d - 1] < p.hi[d]) break;
      at[d - 1] = p.lo[d];
    }
    if (d == 0) return p;
  }
}

struct Ready {
  int64_t batch = 0;
  std::vector<Array> arrays;
  std::exception_ptr error;
};

}  // namespace

struct Loader::Impl {
  std::vector<ArraySource> sources;
  LoaderOptions opt;
  int64_t n = 0, batches = 0;
  // Per source, this process's part of a full batch and of the last, smaller one (drop_last
  // false and a remainder).
  std::vector<Part> full, last;
  int64_t last_size = 0;

  std::mutex mu;
  std::condition_variable work, ready_cv;
  int64_t epoch = 0, produce = 0, consume = 0;
  uint64_t generation = 0;
  std::shared_ptr<const std::vector<int64_t>> perm;  // null: file order
  std::deque<Ready> ready;
  std::exception_ptr failed;
  bool stop = false;
  std::thread worker;

  int64_t size_of(int64_t b) const {
    return b == batches - 1 && last_size ? last_size : opt.global_batch;
  }

  std::vector<Part> parts_for(int64_t batch) const {
    std::vector<Part> parts;
    const int me = process_index();
    for (const ArraySource& s : sources) {
      Shape global = s.sample_shape();
      global.insert(global.begin(), batch);
      Shape lo(global.size(), 0), hi = global;
      if (opt.sharding) {
        opt.sharding->check_fits(global, "data::Loader: a batch of " + std::to_string(batch) +
                                             " samples of " + s.name());
        const std::vector<Index> indices = opt.sharding->indices(global);
        const auto& devs = opt.sharding->mesh().devices();
        bool any = false;
        for (size_t pos = 0; pos < devs.size(); ++pos) {
          if (devs[pos].process_index != me) continue;
          for (size_t d = 0; d < global.size(); ++d) {
            lo[d] = any ? std::min(lo[d], indices[pos][d].first) : indices[pos][d].first;
            hi[d] = any ? std::max(hi[d], indices[pos][d].second) : indices[pos][d].second;
          }
          any = true;
        }
        if (!any) hi[0] = 0;  // no device of the mesh here: no rows
      } else {
        const int64_t p = me, procs = process_count();
        lo[0] = p * batch / procs;
        hi[0] = (p + 1) * batch / procs;
      }
      parts.push_back(part_of(s.sample_shape(), std::move(lo), std::move(hi)));
    }
    return parts;
  }

  int64_t index(const std::vector<int64_t>* order, int64_t position) const {
    return order ? (*order)[static_cast<size_t>(position)] : position;
  }

  std::vector<Array> assemble(const std::vector<int64_t>* order, int64_t b) const {
    const int64_t size = size_of(b);
    const std::vector<Part>& parts = size == opt.global_batch ? full : last;
    std::vector<Array> out;
    for (size_t s = 0; s < sources.size(); ++s) {
      const Part& p = parts[s];
      const ArraySource& src = sources[s];
      Array a = detail::make_array(AbstractValue{p.local_shape, src.dtype(), false});
      if (a.nbytes() != 0) {
        auto* at = static_cast<unsigned char*>(a.impl()->data());
        const auto item = static_cast<size_t>(itemsize(src.dtype()));
        for (int64_t row = p.lo[0]; row < p.hi[0]; ++row) {
          const int64_t sample = index(order, b * opt.global_batch + row);
          for (const auto& [start, count] : p.runs) {
            src.copy_elements(sample, start, count, at);
            at += static_cast<size_t>(count) * item;
          }
        }
      }
      out.push_back(std::move(a));
    }
    return out;
  }

  void run() {
    std::unique_lock lock(mu);
    while (true) {
      work.wait(lock, [&] {
        return stop || (produce < batches && ready.size() < static_cast<size_t>(opt.prefetch));
      });
      if (stop) return;
      const uint64_t gen = generation;
      Ready item;
      item.batch = produce++;
      std::shared_ptr<const std::vector<int64_t>> order = perm;
      lock.unlock();
      try {
        item.arrays = assemble(order.get(), item.batch);
      } catch (...) {
        item.error = std::current_exception();
      }
      lock.lock();
      if (gen != generation) continue;    // start_epoch moved on: dropped
      if (item.error) produce = batches;  // nothing after a failed batch
      ready.push_back(std::move(item));
      ready_cv.notify_all();
    }
  }

  // The next batch's index and arrays, or nullopt at the end of the epoch.
  std::optional<std::pair<int64_t, std::vector<Array>>> next() {
    std::unique_lock lock(mu);
    if (failed) std::rethrow_exception(failed);
    if (consume >= batches) return std::nullopt;
    if (opt.prefetch == 0) {
      const int64_t b = consume++;
      std::shared_ptr<const std::vector<int64_t>> order = perm;
      lock.unlock();
      try {
        return std::pair(b, assemble(order.get(), b));
      } catch (...) {
        lock.lock();
        failed = std::current_exception();
        throw;
      }
    }
    ready_cv.wait(lock, [&] { return !ready.empty(); });
    Ready item = std::move(ready.front());
    ready.pop_front();
    ++consume;
    work.notify_all();
    if (item.error) {
      failed = item.error;
      std::rethrow_exception(item.error);
    }
    return std::pair(item.batch, std::move(item.arrays));
  }
};

Loader::Loader(std::vector<ArraySource> sources, LoaderOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.sources = std::move(sources);
  m.opt = std::move(options);
  const LoaderOptions& opt = m.opt;
  if (m.sources.empty()) fail("data::Loader: expected at least one source, got none");
  m.n = m.sources[0].size();
  for (const ArraySource& s : m.sources)
    if (s.size() != m.n)
      fail("data::Loader: every source must hold the same number of samples; ", m.sources[0].name(),
           " holds ", m.n, ", ", s.name(), " holds ", s.size());
  if (opt.global_batch <= 0)
    fail("data::Loader: expected global_batch > 0, got ", opt.global_batch);
  if (opt.prefetch < 0) fail("data::Loader: expected prefetch >= 0, got ", opt.prefetch);
  const int procs = process_count();  // also fixes the device count on this thread
  if (!opt.sharding && opt.global_batch % procs != 0)
    fail("data::Loader: global_batch ", opt.global_batch, " is not divisible by the ", procs,
         " processes; expected a multiple of ", procs,
         " (each process reads an equal part; or give a sharding)");
  m.batches = m.n / opt.global_batch;
  if (!opt.drop_last && m.n % opt.global_batch != 0) {
    m.last_size = m.n % opt.global_batch;
    ++m.batches;
  }
  m.full = m.parts_for(opt.global_batch);
  if (m.last_size) m.last = m.parts_for(m.last_size);
  start_epoch(0);
  if (opt.prefetch > 0) m.worker = std::thread([&m] { m.run(); });
}

namespace {
std::vector<ArraySource> open_all(const std::vector<std::string>& paths) {
  std::vector<ArraySource> out;
  for (const std::string& p : paths) out.emplace_back(p);
  return out;
}
}  // namespace

Loader::Loader(const std::vector<std::string>& paths, LoaderOptions options)
    : Loader(open_all(paths), std::move(options)) {}

Loader::~Loader() {
  if (!impl_) return;  // moved from
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->work.notify_all();
  if (impl_->worker.joinable()) impl_->worker.join();
}

Loader::Loader(Loader&&) noexcept = default;
Loader& Loader::operator=(Loader&& o) noexcept {
  if (this != &o) {
    Loader gone(std::move(*this));  // stops this loader's thread
    impl_ = std::move(o.impl_);
  }
  return *this;
}

void Loader::start_epoch(int64_t epoch, int64_t first_batch) {
  Impl& m = *impl_;
  if (epoch < 0) fail("data::Loader::start_epoch: expected epoch >= 0, got ", epoch);
  if (first_batch < 0 || first_batch > m.batches)
    fail("data::Loader::start_epoch: expected 0 <= first_batch <= ", m.batches,
         " (the batches per epoch), got ", first_batch);
  std::shared_ptr<const std::vector<int64_t>> order;
  if (m.opt.shuffle)
    order = std::make_shared<const std::vector<int64_t>>(epoch_permutation(m.n, m.opt.seed, epoch));
  std::deque<Ready> dropped;
  {
    std::lock_guard lock(m.mu);
    ++m.generation;
    dropped.swap(m.ready);
    m.epoch = epoch;
    m.produce = m.consume = first_batch;
    m.perm = std::move(order);
    m.failed = nullptr;
  }
  m.work.notify_all();
}

std::optional<std::vector<Array>> Loader::next_local() {
  auto batch = impl_->next();
  if (!batch) return std::nullopt;
  return std::move(batch->second);
}

std::optional<std::vector<Array>> Loader::next() {
  Impl& m = *impl_;
  if (!m.opt.sharding)
    fail(
        "data::Loader::next: no sharding was given (LoaderOptions::sharding); next_local() "
        "gives this process's rows");
  auto batch = m.next();
  if (!batch) return std::nullopt;
  const int64_t size = m.size_of(batch->first);
  std::vector<Array> out;
  for (size_t s = 0; s < m.sources.size(); ++s) {
    Shape global = m.sources[s].sample_shape();
    global.insert(global.begin(), size);
    out.push_back(make_array_from_process_local_data(*m.opt.sharding, batch->second[s], global));
  }
  return out;
}

int64_t Loader::epoch() const {
  std::lock_guard lock(impl_->mu);
  return impl_->epoch;
}
int64_t Loader::batch_index() const {
  std::lock_guard lock(impl_->mu);
  return impl_->consume;
}
int64_t Loader::batches_per_epoch() const { return impl_->batches; }
int64_t Loader::num_samples() const { return impl_->n; }
const std::vector<ArraySource>& Loader::sources() const { return impl_->sources; }
const LoaderOptions& Loader::options() const { return impl_->opt; }

std::pair<int64_t, int64_t> Loader::local_rows(int64_t batch) const {
  const std::vector<Part>& parts = batch == impl_->opt.global_batch ? impl_->full
                                   : batch == impl_->last_size      ? impl_->last
                                                                    : impl_->parts_for(batch);
  return {parts[0].lo[0], parts[0].hi[0]};
}

}  // namespace spmd::data
