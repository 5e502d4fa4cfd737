// IdEpochs: what a frontend's client remembers of the scheduler's model ids
// across ModelTables. A request is resolved to an id under one table and
// may be sent after the next; it must not use the id if, since it was
// resolved, the id took another name or its model was unloaded (dropped
// from a table that serves its name under no other id), even once the name
// is served again elsewhere. A reload drops its replaced id in the table
// that lists the name under the new id: the replaced id still takes what
// was made for it. Each such change moves the id to a new epoch; a request
// keeps the epoch it was resolved at. Not thread-safe (the client's lock).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "symphony/cluster/wire.hpp"

namespace symphony::cluster::detail {

class IdEpochs {
 public:
  // A new table's served models.
  void take(const std::vector<wire::ModelEntry>& served) {
    std::unordered_set<std::uint32_t> ids;
    std::unordered_set<std::string> names;
    for (const wire::ModelEntry& m : served) {
      if (m.id >= name_.size()) {
        name_.resize(m.id + 1);
        epoch_.resize(m.id + 1, 0);
      }
      if (name_[m.id] != m.name) {
        if (!name_[m.id].empty()) ++epoch_[m.id];
        name_[m.id] = m.name;
      }
      ids.insert(m.id);
      names.insert(m.name);
    }
    for (const std::uint32_t id : listed_)
      if (!ids.contains(id) && !names.contains(name_[id])) ++epoch_[id];
    listed_.assign(ids.begin(), ids.end());
  }
  std::uint32_t epoch(std::uint32_t id) const { return id < epoch_.size() ? epoch_[id] : 0; }
  // The name `id` served last ("" for an id no table listed).
  const std::string& name(std::uint32_t id) const { return id < name_.size() ? name_[id] : none_; }

 private:
  std::vector<std::string> name_;
  std::vector<std::uint32_t> epoch_;
  std::vector<std::uint32_t> listed_;  // the last table's ids
  const std::string none_;
};

}  // namespace symphony::cluster::detail
