#include "drivers/native/run_state.h"

namespace safex::drivers::native {

std::string CgroupName(const std::string& run_id) { return "native-" + run_id; }

void RunState::Note(const std::string& what, const Status& st) {
  if (st.ok()) return;
  errors += (errors.empty() ? "" : "; ") + what + ": " + st.message();
}

void RunState::KillAll() {
  Subprocess& p = sandbox.process();
  if (p.valid() && !p.reaped()) p.KillAndWait();
  if (cg.valid()) Note("kill the cgroup's processes", cg.KillAll());
}

void RunState::Teardown() {
  if (torn_down) return;
  torn_down = true;
  KillAll();
  if (cg.valid()) Note("cgroup " + cg.oci_path(), cg.Destroy());
  if (net) Note("network teardown", net->Teardown());
  net.reset();
  outputs.UnmountAll([this](const std::string& what, const Status& st) { Note(what, st); });
  owner_lock.Reset();
  if (!dir.path().empty()) Note("remove " + dir.path(), dir.Remove());
  id = IdLease();  // the host id is free again only now that nothing of the run exists
}

}  // namespace safex::drivers::native
