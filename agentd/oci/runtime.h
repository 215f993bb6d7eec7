#pragma once
// bulwark-oci: an OCI runtime with runc's command line that delegates the
// container's lifecycle to runc or crun and confines every annotated
// container with a Bulwark policy (docs/oci-runtime.md).
//
//   create, run   the policy compiled from the annotations; the spec confined
//                 (oci/confine_spec.h); the container's cgroup made below the
//                 node agentd's BPF cgroup parent and bound to the policy
//                 through agentd (its start record committed) BEFORE the
//                 delegate's create, so the OCI runtime's own setup and the
//                 container's first instruction already run under it; every
//                 rule judged against the layers in force (a rule none holds
//                 refuses the create, naming file:line:col); then the delegate.
//   exec          the process confined the same way (launcher first, no
//                 capabilities, no_new_privs).
//   delete        the delegate's delete, then the binding released (its exit
//                 recorded) and the container's state removed.
//   anything else passed to the delegate unchanged (start, state, kill, ps,
//                 pause, resume, update, events, features, ...).
// A container without the annotation runs under the delegate as is, or is
// refused (config `unannotated`). Errors go to stderr and to runc's --log
// file in its --log-format, where containerd and conmon read them.
#include <string>
#include <vector>

namespace bulwark::oci {

// argv without argv[0]; returns the process's exit status (or does not
// return: a command passed through replaces this process with the delegate).
int run_runtime(const std::vector<std::string>& words);

}  // namespace bulwark::oci
