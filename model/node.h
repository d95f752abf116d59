// The part of a Kubernetes Node that fitledger reads.
#ifndef FITLEDGER_MODEL_NODE_H_
#define FITLEDGER_MODEL_NODE_H_

#include <string>

#include "model/pod.h"

namespace fitledger {

struct Node {
  std::string name;
  // status.allocatable, or status.capacity when allocatable is absent (as the scheduler's
  // NodeInfo counts a node that reports no allocatable).
  QuantityList allocatable;
};

}  // namespace fitledger

#endif  // FITLEDGER_MODEL_NODE_H_
