// The value every plain (handle-less) binding returns on failure, as web/src/*.js reads it:
// {ok: false, errorJson, errorText}, the error rendered by the core (app/report.h) in both forms.
#pragma once

#include <emscripten/val.h>

#include "app/report.h"
#include "core/error.h"

namespace pb::wasm {

inline emscripten::val FailureValue(const Error& e) {
  emscripten::val r = emscripten::val::object();
  r.set("ok", false);
  r.set("errorJson", RenderErrorJson(e));
  r.set("errorText", RenderErrorText(e));
  return r;
}

}  // namespace pb::wasm
