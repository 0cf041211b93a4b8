// Emscripten gives a program a fixed environment, not Node's: pass on the variables the C++ tests read
// (PB_REQUIRE_FIXTURES, set by .ci/run, turns a missing-fixture skip into a failure; PB_FIXTURES names the
// fixtures directory; test_util.h).
Module['preRun'] = Module['preRun'] || [];
Module['preRun'].push(function () {
  for (const name of ['PB_REQUIRE_FIXTURES', 'PB_FIXTURES']) {
    if (typeof process !== 'undefined' && process.env[name] !== undefined) ENV[name] = process.env[name];
  }
});
