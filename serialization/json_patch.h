// Editing a JSON document by a list of operations, a subset of JSON Patch (RFC 6902):
// "add", "replace" and "remove" at a JSON pointer. A training config's `model_patch`
// changes the model file it names this way, so that a sweep over one field of a model (a
// noise annotation's eps, a penalty's lambda, an added penalty term) is a config of a few
// lines rather than a copy of the whole model file.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace pens {

// `doc` with each operation of `patch` applied in turn. Every problem is a pens::Error
// starting with "`source`[i]" (the operation's index) that names the path and what is
// there: an operation that is not {"op", "path"[, "value"]}, a pointer into nothing, an
// array index past the end, a "replace" or "remove" of a member that is not there.
//   {"op": "replace", "path": "/inputs/0/noise/0/eps", "value": 1.5}
//   {"op": "add", "path": "/pseudo_ensemble/penalties/-", "value": {...}}  ("-": append)
//   {"op": "remove", "path": "/pseudo_ensemble/penalties/1"}
nlohmann::json apply_json_patch(nlohmann::json doc, const nlohmann::json& patch, const std::string& source);

}  // namespace pens
