// A plugin whose description() throws: it is skipped with its file named; the others load.
#include <stdexcept>

#include "core/plugin/policy.h"

namespace {
class DescriptionThrows final : public remat::Policy {
 public:
  std::string name() const override { return "description_throws"; }
  std::string description() const override { throw std::runtime_error("no words for it"); }
  std::vector<remat::ParamDecl> params() const override { return {}; }
  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    return remat::store_all_schedule(ctx.blocks);
  }
};
}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(DescriptionThrows)
