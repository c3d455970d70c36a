// A mean teacher (Tarvainen & Valpola 2017) for any model built in C++: for every
// trainable parameter P a frozen parameter "teacher/P" holding the moving average of P
// (graph/graph.h, MovingAverage), which starts equal to P (ParamStore::initialize) and
// follows it after every update. A pseudo-ensemble with `teacher: 1` makes child 1 read
// these in place of the student's parameters (graph/pseudo_ensemble.h). With
// at_inference, the moving averages of batch statistics already in the graph (batch
// normalisation's running statistics) follow child 1's pass, the teacher's, instead of
// the clean student's: inference pairs them with the teacher's weights.
#pragma once

#include "pens/graph/graph.h"

namespace pens {

// decay: of the average per update (the paper's 0.99 early, 0.999 later). at_inference:
// inference graphs read the teacher's parameters (the mean teacher's reported figures)
// rather than the student's. teacher_child: the child that reads the averages
// (pseudo_ensemble.teacher), whose batch statistics the running statistics then follow;
// 0 where no child is the teacher (averaged weights for evaluation only, as a ladder
// network's, whose child 1 is its corrupted encoder): the running statistics stay the
// parent's, and eval.recalibrate_statistics makes them fit the averaged weights.
void add_teacher(Graph& g, double decay, bool at_inference = true, int64_t teacher_child = 1);

}  // namespace pens
