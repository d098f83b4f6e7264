// A shared library that is not a policy plugin: it has no remat_policy_plugin symbol.
extern "C" __attribute__((visibility("default"))) int remat_something_else() { return 42; }
