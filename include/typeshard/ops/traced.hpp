// typeshard/ops/traced.hpp: the values ts::value_and_grad passes for the differentiated
// arguments, and typeshard's ops on them.
//
//   auto loss = [](auto w, auto x, auto y) {        // w: a ts::traced<...>, x, y: arrays
//     auto h = ts::tanh(ts::einsum<"bd,dh->bh">(x, w));
//     return ts::mean(ts::sum<1>(h * h) - ts::sum<1>(y));
//   };
//
// A traced<Array> holds the forward value (computed eagerly by the ordinary op: the same
// plan, the same collectives) and records the op's backward on the tape. Plain arrays mix
// with traced values in every binary op; they get no gradient. The ops on traced values:
// ts::einsum, ts::matmul (the "...ij,...jk->...ik" einsum), + - * / with broadcasting and
// scalars, unary -, exp log tanh relu sin cos sqrt, sigmoid softplus gelu rsqrt pow clip, take,
// ts::where (comparisons give a plain mask, argmax and argmin a plain index), ts::sum and
// ts::mean (Dims, keep_dims, an output spec), ts::softmax and ts::log_softmax, ts::reshard,
// ts::psum, ts::permute, ts::transpose (permute<1, 0>), ts::split_dim, ts::merge_dims,
// ts::slice_in_dim, ts::split, ts::concat, ts::max and ts::min (every form), ts::maximum and
// ts::minimum, ts::layer_norm.
// Each backward is itself one of these ops on global arrays (plan/grad_plan.hpp), so its
// collectives are planned at compile time:
//   einsum       d lhs = einsum<"out,rhs->lhs">(d out, rhs), d rhs likewise, then resharded
//                to the operand's spec (the all-reduce of Megatron's dX = dH W1^T is this
//                reshard of a result unreduced over "model");
//   broadcast    the cotangent summed over the stretched dimensions (unreduced where those
//                are sharded), then resharded;
//   sum, mean    the cotangent broadcast back (mean: scaled by 1 / count);
//   softmax      y * (g - sum(g * y)) along the dimension (its sum a psum when sharded);
//   layer_norm   (g - mean(g) - y * mean(g * y)) * rstd: one fused row pass (one psum of
//                both row sums when the dimension is sharded);
//   reshard      the reverse reshard (all_gather <-> slice, all_to_all <-> all_to_all back,
//                psum <-> identity);
//   dimension moves  the inverse move (no communication);
//   slice, split  the cotangent padded with zeros; concat: the cotangent's slices;
//   max, min     the cotangent to the extrema, ties sharing it equally (JAX's rule);
//                maximum / minimum: to the chosen operand, half each on a tie.
// ts::map, ts::zip and ts::shard_map on a traced value are rule-9 compile errors, never a
// wrong gradient.
//
// (The type is in detail/traced_value.hpp, the ops on it in detail/traced_*.hpp, one file per
// op family. ts::einsum, matmul, sum, mean, max, min, maximum, minimum, binary + - * /, unary
// -, sin cos exp log tanh sqrt relu, the comparisons and ts::layer_norm have one entry point
// for every operand kind, in their own headers (ops/einsum.hpp, ops/matmul.hpp, ops/reduce.hpp,
// ops/elementwise.hpp, ops/where.hpp, ops/layer_norm.hpp), which call the backward rule
// defined in detail/traced_*.hpp.)
#pragma once

#include "detail/traced_dims.hpp"
#include "detail/traced_einsum.hpp"
#include "detail/traced_elementwise.hpp"
#include "detail/traced_extrema.hpp"
#include "detail/traced_functions.hpp"
#include "detail/traced_layer_norm.hpp"
#include "detail/traced_reduce.hpp"
#include "detail/traced_slices.hpp"
#include "detail/traced_value.hpp"
// Mixed precision on traced values: ts::astype (the backward casts back) and einsum / matmul
// with preferred_element (float master weights, bf16 compute, float gradients).
#include "detail/traced_mixed.hpp"
