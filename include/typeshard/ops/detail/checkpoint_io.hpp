// typeshard/ops/detail/checkpoint_io.hpp: the run-time part of ops/checkpoint.hpp, on values
// (arrays as their boxes and bytes): index.json and the error type (checkpoint_index.hpp),
// writing a step's files in parallel and atomically (checkpoint_save.hpp), reading the bytes
// of the boxes a device needs (checkpoint_load.hpp).
#pragma once

#include "checkpoint_index.hpp"
#include "checkpoint_load.hpp"
#include "checkpoint_save.hpp"
