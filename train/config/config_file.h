// Reading a config file, with its "base" resolved. Experiments are mostly variations of
// one another (a longer schedule, another batch, one more penalty), so a config may name
// another config of the same folder as its base and write only what differs:
//
//   {"description": "...", "base": "ladder-clean-100-anneal-24-150.json",
//    "optimizer": {"anneal_end_epoch": 200}, "run": {"epochs": 200}}
//
// The config's members are laid over its base's as a JSON merge patch (RFC 7396): an object
// merges member by member, any other value (a number, a string, an array such as
// model_patch or lambda_schedule) replaces the base's, and null removes the base's member.
// The base's "description" is never inherited (a config describes itself). A base may have
// a base of its own. The base must be a file of the config's own folder, so that the paths
// a config holds (its model file, its data folder) mean the same in either.
//
// Every kind of run reads its config through this (pens train, pens pretrain, the Python
// package); the config.json a run folder gets is the resolved config, with no base.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace pens {

// The config at `path` (JSON, at most 1 MiB), its base chain laid under it as above; an
// Error names the file and what is wrong (a missing base, a base in another folder, a
// cycle, a chain deeper than kMaxConfigBases).
nlohmann::json read_config_file(const std::string& path);

// Bases deep enough for any family of experiments, shallow enough to stop a mistake.
inline constexpr int kMaxConfigBases = 16;

}  // namespace pens
