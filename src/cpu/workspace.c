/* workspace.c — the CPU passes' workspace layouts: one table read by the size query and by
 * the passes, so the two can never disagree. */
#include "cpu.h"

#define VC_WS_ALIGN 64
/* Rows per gather -> GEMM -> scatter chunk: large enough for an efficient GEMM, small
 * enough that the gathered block stays in the last-level cache. */
#define VC_CPU_CHUNK_ROWS 4096

int64_t vc_cpu_chunk_rows(const vc_plan *p) {
  return p->max_pairs < VC_CPU_CHUNK_ROWS ? p->max_pairs : VC_CPU_CHUNK_ROWS;
}

void vc_cpu_ws_layout(const vc_plan *p, const vc_conv_args *a, vc_pass pass, vc_cpu_ws *ws) {
  const int64_t ci = a->in_channels, co = a->out_channels, k = p->kvol, w = co * k * ci;
  const int64_t ch = vc_cpu_chunk_rows(p);
  const bool f32 = a->dtype == VC_DTYPE_F32;
  int64_t n[VC_WS_MAX_PARTS] = {0};
  size_t esz;
  if (a->algo == VC_ALGO_REFERENCE) {
    esz = sizeof(double);
    if (pass == VC_PASS_FORWARD) {
      n[0] = p->n_out * co, n[1] = p->n_in * ci, n[2] = w;
    } else if (pass == VC_PASS_BACKWARD_DATA) {
      n[0] = p->n_in * ci, n[1] = p->n_out * co, n[2] = w;
    } else {
      n[0] = w, n[1] = p->n_in * ci, n[2] = p->n_out * co;
    }
  } else {
    esz = sizeof(float);
    if (pass == VC_PASS_FORWARD) {
      n[0] = f32 ? 0 : w, n[1] = f32 ? 0 : p->n_out * co, n[2] = ch * ci, n[3] = ch * co;
    } else if (pass == VC_PASS_BACKWARD_DATA) {
      n[0] = f32 ? 0 : w, n[1] = f32 ? 0 : p->n_in * ci, n[2] = ch * co, n[3] = ch * ci;
    } else {
      n[0] = f32 ? 0 : w, n[1] = ch * ci, n[2] = ch * co;
    }
  }
  ws->total = 0;
  for (int i = 0; i < VC_WS_MAX_PARTS; i++) {
    ws->bytes[i] = (size_t)n[i] * esz;
    if (ws->bytes[i]) ws->total += (size_t)vc_round_up((int64_t)ws->bytes[i], VC_WS_ALIGN);
  }
  if (ws->total) ws->total += VC_WS_ALIGN; /* slack to align an unaligned caller pointer */
}

void vc_cpu_ws_split(const vc_cpu_ws *ws, void *base, void *part[VC_WS_MAX_PARTS]) {
  uintptr_t at = (uintptr_t)vc_round_up((int64_t)(uintptr_t)base, VC_WS_ALIGN);
  for (int i = 0; i < VC_WS_MAX_PARTS; i++) {
    part[i] = ws->bytes[i] ? (void *)at : NULL;
    at += (uintptr_t)vc_round_up((int64_t)ws->bytes[i], VC_WS_ALIGN);
  }
}

void vc_cpu_pass_begin(const vc_plan *p, const vc_conv_args *a, vc_pass pass, void *ws, void *part[VC_WS_MAX_PARTS]) {
  vc_cpu_ws layout;
  vc_cpu_ws_layout(p, a, pass, &layout);
  vc_cpu_ws_split(&layout, ws, part);
}
