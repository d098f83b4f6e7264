// A plugin whose plan starts a process that leaves its process group (setsid) and sleeps for
// five minutes holding the program's standard output and error, then plans as `none` does. The
// sleeper's pid goes to the file named by REMAT_TEST_ORPHAN_PIDFILE. Nothing it started may
// outlive the planning child, so a command capturing the output ends at once.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include "core/plugin/policy.h"

namespace {
class PlanOrphan final : public remat::Policy {
 public:
  std::string name() const override { return "plan_orphan"; }
  std::string description() const override { return "leaves a process behind that left its group"; }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    // The sleeper says on a pipe when it has left the group and written its pid: the plan waits
    // for that (a fixed wait was too short on a loaded machine), then ends with the sleeper alive.
    int ready[2];
    if (::pipe(ready) != 0) std::abort();
    if (::fork() == 0) {
      if (::fork() != 0) ::_exit(0);  // the sleeper's parent ends: it is an orphan
      ::setsid();
      if (const char* f = std::getenv("REMAT_TEST_ORPHAN_PIDFILE")) {
        if (std::FILE* out = std::fopen(f, "w")) {
          std::fprintf(out, "%d\n", static_cast<int>(::getpid()));
          std::fclose(out);
        }
      }
      const char byte = 1;
      (void)!::write(ready[1], &byte, 1);
      ::close(ready[0]);
      ::close(ready[1]);
      ::sleep(300);
      ::_exit(0);
    }
    ::close(ready[1]);
    char byte = 0;
    while (::read(ready[0], &byte, 1) < 0 && errno == EINTR) {
    }
    ::close(ready[0]);
    return remat::store_all_schedule(ctx.blocks);
  }
};
}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(PlanOrphan)
