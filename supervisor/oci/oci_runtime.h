// safex-oci: an OCI runtime with runc's command-line contract, so that containerd's stock
// io.containerd.runc.v2 shim (its BinaryName option) and CRI-O (runtime_path) drive safex the
// way they drive runc. It is the `safex` binary started under the name `safex-oci` (a shim's
// BinaryName is one path, with no arguments). docs/kubernetes.md says how a node is set up.
//
//   safex-oci [--root DIR] [--log FILE] [--log-format json|text] [--debug] COMMAND ...
//     create --bundle DIR [--pid-file FILE] [--console-socket SOCK] ID
//     start ID | state ID | kill [--all] ID [SIGNAL] | delete [--force] ID | ps ID | features
//     --version
// The container's state lives under --root (container_state.h); its run is the monitor's
// (monitor.h). A pod's sandbox (pause) container is handed to runc unchanged.
#pragma once

namespace safex::supervisor::oci {

int RunOciRuntime(int argc, char** argv);

}  // namespace safex::supervisor::oci
