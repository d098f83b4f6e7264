# Run by ctest after the unit tests are discovered (TEST_INCLUDE_FILES): the plugin isolation
# tests would hang, not fail, if a plugin could block the program (a FIFO opened as a library,
# a plan that never returns), so each gets a time limit of its own.
foreach(_t IN LISTS remat_unit_tests_TESTS)
  if(_t MATCHES "^PolicyIsolation\\.")
    set_tests_properties(${_t} PROPERTIES TIMEOUT 120)
  endif()
endforeach()
