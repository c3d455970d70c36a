// Moving averages of a model's trainable parameters, built in C++ or by pens new.
//
// A mean teacher (Tarvainen & Valpola 2017): for every trainable parameter P a frozen
// parameter "teacher/P" holding the moving average of P (graph/graph.h, MovingAverage),
// which starts equal to P (ParamStore::initialize) and follows it after every update. A
// pseudo-ensemble with `teacher: 1` makes child 1 read these in place of the student's
// parameters (graph/pseudo_ensemble.h). With at_inference, the moving averages of batch
// statistics already in the graph (batch normalisation's running statistics) follow
// child 1's pass, the teacher's, instead of the clean student's: inference pairs them
// with the teacher's weights.
//
// Averaged weights for evaluation alone (Polyak averaging): "average/P", read at
// inference and by no child, as for a ladder network, whose child 1 is its corrupted
// encoder, or a VAT network.
#pragma once

#include <string>
#include <vector>

#include "pens/graph/graph.h"

namespace pens {

// decay: of the average per update (the paper's 0.99 early, 0.999 later). at_inference:
// inference graphs read the teacher's parameters (the mean teacher's reported figures)
// rather than the student's. teacher_child: the child that reads the averages
// (pseudo_ensemble.teacher, >= 1), whose batch statistics the running statistics then
// follow.
void add_teacher(Graph& g, double decay, bool at_inference = true, int64_t teacher_child = 1);

// Averages of the trainable parameters whose whole name matches `params` (an ECMAScript
// regular expression; a ladder's decoder, which inference never reads, need not be
// averaged). The running statistics stay the clean pass's, which fit other weights:
// eval.recalibrate_statistics refits them to the averages. Returns the names of the
// parameters averaged. Fails where `params` is not a regular expression, matches no
// trainable parameter, or matches one that already has an average.
std::vector<std::string> add_weight_averages(Graph& g, double decay, const std::string& params = ".*");

}  // namespace pens
