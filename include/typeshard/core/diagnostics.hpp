// typeshard/core/diagnostics.hpp: every compile-time message, rule by rule.
//
// You never use these directly: when a sharding is invalid, typeshard instantiates the
// matching class template of ts::diagnostic, and the compiler prints its message (the first
// `error:` line) and its name with the offending axis spelled out, for example
//   in instantiation of 'typeshard::diagnostic::axis_not_in_mesh<'z'>'
// The messages all begin with "typeshard:", name their rule (DESIGN.md's rules, or the
// topic: mesh, elements, visualize) and say the fix. Rule N's messages live in
// core/rules/ruleN_<name>.hpp, which also says where it is checked; its compile-fail tests
// are tests/compile_fail/ruleN_*.cpp; docs/rules.md tabulates them all.
#pragma once

#include "rules/collectives.hpp"
#include "rules/elements.hpp"
#include "rules/indexing.hpp"
#include "rules/mesh.hpp"
#include "rules/rule1_spec.hpp"
#include "rules/rule2_einsum.hpp"
#include "rules/rule2_matmul.hpp"
#include "rules/rule3_unreduced.hpp"
#include "rules/rule4_shard_map.hpp"
#include "rules/rule5_elementwise.hpp"
#include "rules/rule6_extents.hpp"
#include "rules/rule8_dimension_moves.hpp"
#include "rules/rule9_gradients.hpp"
#include "rules/visualize.hpp"
