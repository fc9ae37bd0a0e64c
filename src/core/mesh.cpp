// Mesh, PartitionSpec, NamedSharding and Sharding: the value types of include/spmd/mesh.h.
#include "spmd/mesh.h"

#include <algorithm>
#include <set>

#include "spmd/error.h"
#include <functional>

namespace spmd {

namespace {
std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string ids_str(const std::vector<Device>& devices) {
  std::string s = "[";
  for (size_t i = 0; i < devices.size(); ++i) s += (i ? ", " : "") + std::to_string(devices[i].id);
  return s + "]";
}
// A mesh position's coordinates (row-major: the last axis varies fastest).
std::vector<int64_t> coords_of(const std::vector<int64_t>& sizes, int64_t pos) {
  std::vector<int64_t> coord(sizes.size());
  for (size_t k = sizes.size(); k-- > 0;) {
    coord[k] = pos % sizes[k];
    pos /= sizes[k];
  }
  return coord;
}
}  // namespace

Mesh::Mesh(std::vector<int64_t> shape, std::vector<std::string> axis_names,
           std::vector<Device> devices)
    : shape_(std::move(shape)), names_(std::move(axis_names)), devices_(std::move(devices)) {
  if (shape_.size() != names_.size())
    fail("Mesh: expected one axis name per mesh dimension, got shape of rank ", shape_.size(),
         " and ", names_.size(), " axis names");
  if (shape_.empty()) fail("Mesh: expected at least one axis, got none");
  std::set<std::string> seen;
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (shape_[i] < 1)
      fail("Mesh: expected axis sizes >= 1, got ", shape_[i], " for axis ", quoted(names_[i]));
    if (names_[i].empty()) fail("Mesh: expected non-empty axis names, got an empty one");
    if (!seen.insert(names_[i]).second)
      fail("Mesh: expected distinct axis names, got ", quoted(names_[i]), " twice");
  }
  const int64_t n = size();
  if (devices_.empty()) {
    std::vector<Device> all = spmd::devices();
    if (n > static_cast<int64_t>(all.size()))
      fail("Mesh of shape ", str(), " needs ", n, " devices, but only ", all.size(),
           " are available");
    devices_.assign(all.begin(), all.begin() + n);
  } else if (static_cast<int64_t>(devices_.size()) != n) {
    fail("Mesh: expected ", n, " devices for a mesh of shape ", str(), ", got ", devices_.size());
  }
  std::set<int> ids;
  for (const Device& d : devices_)
    if (!ids.insert(d.id).second) fail("Mesh: device ", d.str(), " is listed twice");
  types_.assign(shape_.size(), AxisType::Explicit);
}

const char* axis_type_str(AxisType t) {
  switch (t) {
    case AxisType::Explicit: return "Explicit";
    case AxisType::Auto: return "Auto";
    case AxisType::Manual: return "Manual";
  }
  return "?";
}

AxisType Mesh::axis_type(const std::string& name) const {
  axis_size(name);  // throws naming the mesh's axes
  auto it = std::find(names_.begin(), names_.end(), name);
  return types_[static_cast<size_t>(it - names_.begin())];
}

Mesh Mesh::with_axis_types(std::vector<AxisType> types) const {
  if (types.size() != names_.size())
    fail("Mesh: expected one axis type per axis of ", str(), " (", names_.size(), "), got ",
         types.size());
  Mesh m = *this;
  m.types_ = std::move(types);
  return m;
}

int64_t Mesh::size() const {
  int64_t n = 1;
  for (int64_t s : shape_) n *= s;
  return n;
}

int64_t Mesh::axis_size(const std::string& name) const {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return shape_[i];
  std::string known;
  for (const auto& n : names_) known += (known.empty() ? "" : ", ") + quoted(n);
  fail("mesh axis ", quoted(name), " is not an axis of ", str(), "; expected one of ", known);
}

std::string Mesh::str() const {
  std::string s = "Mesh(";
  for (size_t i = 0; i < names_.size(); ++i)
    s += (i ? ", " : "") + quoted(names_[i]) + ": " + std::to_string(shape_[i]);
  if (std::any_of(types_.begin(), types_.end(), [](AxisType t) { return t != AxisType::Explicit; })) {
    s += ", axis_types=(";
    for (size_t i = 0; i < types_.size(); ++i) s += (i ? ", " : "") + std::string(axis_type_str(types_[i]));
    s += types_.size() == 1 ? ",)" : ")";
  }
  return s + ")";
}

Mesh make_mesh(std::vector<int64_t> shape, std::vector<std::string> axis_names,
               std::vector<AxisType> axis_types) {
  Mesh m(std::move(shape), std::move(axis_names));
  return axis_types.empty() ? m : m.with_axis_types(std::move(axis_types));
}

std::vector<std::string> PartitionSpec::axes() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.insert(out.end(), e.axes.begin(), e.axes.end());
  return out;
}

std::string PartitionSpec::str() const {
  std::string s = "P(";
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto& axes = entries_[i].axes;
    s += i ? ", " : "";
    if (axes.empty()) {
      s += "None";
    } else if (axes.size() == 1) {
      s += quoted(axes[0]);
    } else {
      s += "(";
      for (size_t k = 0; k < axes.size(); ++k) s += (k ? ", " : "") + quoted(axes[k]);
      s += ")";
    }
  }
  if (entries_.size() == 1) s += ",";  // a one-element tuple, as Python prints it
  return s + ")";
}

std::vector<Device> Mesh::local_devices() const {
  std::vector<Device> out;
  for (const Device& d : devices_)
    if (d.process_index == process_index()) out.push_back(d);
  return out;
}

bool Mesh::is_multi_process() const {
  return std::any_of(devices_.begin(), devices_.end(),
                     [&](const Device& d) { return d.process_index != devices_[0].process_index; });
}

bool PartitionSpec::operator==(const PartitionSpec& o) const {
  auto trimmed = [](const std::vector<Entry>& e) {
    size_t n = e.size();
    while (n > 0 && e[n - 1].axes.empty()) --n;
    return std::vector<Entry>(e.begin(), e.begin() + static_cast<std::ptrdiff_t>(n));
  };
  return trimmed(entries_) == trimmed(o.entries_);
}

NamedSharding::NamedSharding(Mesh mesh, PartitionSpec spec)
    : mesh_(std::move(mesh)), spec_(std::move(spec)) {
  const auto& names = mesh_.axis_names();
  std::set<std::string> used;
  for (const auto& e : spec_.entries())
    for (const std::string& a : e.axes) {
      if (std::find(names.begin(), names.end(), a) == names.end()) {
        std::string known;
        for (const auto& n : names) known += (known.empty() ? "" : ", ") + quoted(n);
        fail("NamedSharding: the spec ", spec_.str(), " names mesh axis ", quoted(a),
             ", but the mesh ", mesh_.str(), " has axes ", known);
      }
      if (!used.insert(a).second)
        fail("NamedSharding: the spec ", spec_.str(), " names mesh axis ", quoted(a),
             " twice; expected each mesh axis at most once");
    }
  // (Trailing whole dimensions do not count, as in operator==.)
  size_t h = 0;
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  for (int64_t s : mesh_.shape()) mix(static_cast<size_t>(s));
  for (const std::string& n : names) mix(std::hash<std::string>()(n));
  for (const Device& d : mesh_.devices()) mix(static_cast<size_t>(d.id));
  for (AxisType t : mesh_.axis_types()) mix(static_cast<size_t>(t));
  size_t used_entries = spec_.entries().size();
  while (used_entries > 0 && spec_.entries()[used_entries - 1].axes.empty()) --used_entries;
  for (size_t i = 0; i < used_entries; ++i) {
    mix(0x51ed27u + i);
    for (const std::string& a : spec_.entries()[i].axes) mix(std::hash<std::string>()(a));
  }
  hash_ = h;
}

void NamedSharding::check_fits(const Shape& global, const std::string& what) const {
  if (spec_.entries().size() > global.size())
    fail(what, ": ", str(), " has a spec of length ", spec_.entries().size(),
         ", but the array has rank ", global.size(), " (shape ", shape_str(global),
         "); expected a spec no longer than the rank");
  for (size_t d = 0; d < spec_.entries().size(); ++d) {
    int64_t parts = 1;
    for (const std::string& a : spec_.entries()[d].axes) parts *= mesh_.axis_size(a);
    if (global[d] % parts != 0)
      fail(what, ": ", str(), " implies that the size of dimension ", d, " should be divisible by ",
           parts, ", but it is equal to ", global[d], " (full shape: ", shape_str(global), ")");
  }
}

Shape NamedSharding::shard_shape(const Shape& global) const {
  check_fits(global, "shard_shape");
  Shape block = global;
  for (size_t d = 0; d < spec_.entries().size(); ++d)
    for (const std::string& a : spec_.entries()[d].axes) block[d] /= mesh_.axis_size(a);
  return block;
}

std::vector<Index> NamedSharding::indices(const Shape& global) const {
  const Shape block = shard_shape(global);
  const auto& names = mesh_.axis_names();
  const auto& sizes = mesh_.shape();
  std::vector<Index> out;
  for (int64_t pos = 0; pos < mesh_.size(); ++pos) {
    const std::vector<int64_t> coord = coords_of(sizes, pos);
    Index index;
    for (size_t d = 0; d < global.size(); ++d) {
      int64_t part = 0;  // the block's number along d: its axes' coordinates, the first major
      if (d < spec_.entries().size())
        for (const std::string& a : spec_.entries()[d].axes) {
          const size_t k =
              static_cast<size_t>(std::find(names.begin(), names.end(), a) - names.begin());
          part = part * sizes[k] + coord[k];
        }
      index.emplace_back(part * block[d], (part + 1) * block[d]);
    }
    out.push_back(std::move(index));
  }
  return out;
}

std::vector<int> NamedSharding::replica_ids() const {
  const auto& sizes = mesh_.shape();
  const auto& names = mesh_.axis_names();
  const std::vector<std::string> named = spec_.axes();
  std::vector<int> out;
  for (int64_t pos = 0; pos < mesh_.size(); ++pos) {
    int64_t id = 0;  // the coordinates on the axes the spec leaves out, row-major
    const std::vector<int64_t> coord = coords_of(sizes, pos);
    for (size_t k = 0; k < sizes.size(); ++k)
      if (std::find(named.begin(), named.end(), names[k]) == named.end())
        id = id * sizes[k] + coord[k];
    out.push_back(static_cast<int>(id));
  }
  return out;
}

bool NamedSharding::is_fully_replicated() const {
  for (const std::string& a : spec_.axes())
    if (mesh_.axis_size(a) > 1) return false;
  return true;
}

bool NamedSharding::is_fully_addressable() const {
  return std::all_of(mesh_.devices().begin(), mesh_.devices().end(),
                     [](const Device& d) { return d.process_index == process_index(); });
}

std::string NamedSharding::str() const {
  return "NamedSharding(mesh=" + mesh_.str() + ", spec=" + spec_.str() + ")";
}

Sharding::Sharding(NamedSharding named)
    : kind_(Kind::Named),
      devices_(named.mesh().devices()),
      named_(std::make_shared<const NamedSharding>(std::move(named))) {}

Sharding Sharding::single_device(Device device) {
  Sharding s;
  s.kind_ = Kind::SingleDevice;
  s.devices_ = {std::move(device)};
  return s;
}

Sharding Sharding::pmap(std::vector<Device> devices) {
  Sharding s;
  s.kind_ = Kind::Pmap;
  s.devices_ = std::move(devices);
  return s;
}

const NamedSharding& Sharding::named() const {
  if (kind_ != Kind::Named) fail("Sharding::named: expected a NamedSharding, got ", str());
  return *named_;
}

std::vector<Device> Sharding::device_set() const { return devices_; }

bool Sharding::is_fully_replicated() const {
  switch (kind_) {
    case Kind::SingleDevice:
      return true;
    case Kind::Pmap:
      return devices_.size() == 1;
    case Kind::Named:
      return named_->is_fully_replicated();
  }
  return true;
}

bool Sharding::is_fully_addressable() const {
  return kind_ != Kind::Named || named_->is_fully_addressable();
}

Shape Sharding::shard_shape(const Shape& global) const {
  if (kind_ == Kind::Named) return named_->shard_shape(global);
  Shape block = global;
  if (kind_ == Kind::Pmap && !block.empty()) block[0] /= static_cast<int64_t>(devices_.size());
  return block;
}

std::string Sharding::str() const {
  switch (kind_) {
    case Kind::SingleDevice:
      return "SingleDeviceSharding(device=" + devices_[0].str() + ")";
    case Kind::Pmap:
      return "PmapSharding(devices=" + ids_str(devices_) + ", sharded_dim=0)";
    case Kind::Named:
      return named_->str();
  }
  return {};
}

bool Sharding::operator==(const Sharding& o) const {
  if (kind_ != o.kind_) return false;
  if (kind_ == Kind::Named) return *named_ == *o.named_;
  return devices_ == o.devices_;
}

}  // namespace spmd
