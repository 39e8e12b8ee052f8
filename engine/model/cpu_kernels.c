/* CPU kernels for the steps where PyTorch's general-purpose ops waste the most: a decode step.
 *
 * A decode step multiplies a few rows (one per request) by every weight of the model, and attends
 * one query per request over its paged K/V. Both are bound by memory, not arithmetic: the step
 * must read ~0.5 GB of weights and every request's K/V once. What these kernels do differently:
 *
 *   small_batch_linear      streams each weight row once for all input rows, asks for the next
 *                           rows before it needs them (so the memory system always has reads in
 *                           flight), and applies the op that follows the matmul (SiLU, a residual
 *                           add, a gating multiply) while the result is still in registers.
 *   paged_decode_attention  reads each request's K/V where it lies, block by block through its
 *                           block table (vLLM's paged attention), instead of first copying it into
 *                           a contiguous tensor as a PyTorch-only version must.
 *
 * A third, rms_norm, is small: torch computes RMSNorm in five elementwise passes, each a call that
 * costs more than the arithmetic when a step has a few rows (61 norms a step for a 30-layer model).
 *
 * Plain C, built on first use by engine/model/native.py with the machine's own compiler
 * (-O3 -march=native; OpenMP shares torch's thread pool). The PyTorch paths they replace stay the
 * reference: tests check both give the same numbers (up to float rounding order).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

enum { OP_NONE = 0, OP_SILU = 1, OP_ADD = 2, OP_MUL = 3 };

/* What follows the matmul, applied to one result: silu(acc), acc + other, or acc * other. */
static inline float epilogue(float acc, int64_t op, const float *other, int64_t at) {
    if (op == OP_SILU) return acc / (1.0f + expf(-acc));
    if (op == OP_ADD) return acc + other[at];
    if (op == OP_MUL) return acc * other[at];
    return acc;
}

/* One weight row against input rows i0 .. m-1 (the tail of a block of rows, or a lone row). */
static void rows_one_by_one(const float *x, const float *row, float *out, const float *bias, const float *other,
                            int64_t i0, int64_t m, int64_t n, int64_t k, int64_t j, int64_t op) {
    for (int64_t i = i0; i < m; i++) {
        const float *xi = x + i * k;
        float acc = 0.0f;
        #pragma omp simd reduction(+:acc)
        for (int64_t c = 0; c < k; c++) acc += xi[c] * row[c];
        if (bias) acc += bias[j];
        out[i * n + j] = epilogue(acc, op, other, i * n + j);
    }
}

/* out[m, n] = op(x[m, k] @ w[n, k]^T + bias) for a few rows m (a decode step's batch).
 *
 * Weight rows are taken four at a time, input rows four at a time: sixteen independent sums, so
 * the CPU's multiply-add units never wait on one another, and every weight value loaded is used
 * for four inputs. While a block of four weight rows is used, the next block is prefetched, spread
 * over the passes, so that reads from memory are always in flight. Threads split the weight rows.
 */
void small_batch_linear(const float *x, const float *w, const float *bias, const float *other, float *out,
                        int64_t m, int64_t n, int64_t k, int64_t op) {
    const int64_t whole = n - n % 4;
    #pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < whole; j += 4) {
        const float *r0 = w + j * k, *r1 = r0 + k, *r2 = r1 + k, *r3 = r2 + k;
        const char *next = (const char *)(r0 + 4 * k), *end = (const char *)(w + n * k);
        const int64_t bytes = 4 * k * (int64_t)sizeof(float), passes = (m + 3) / 4;
        const int64_t share = (bytes / passes + 63) / 64 * 64;  /* cache lines to prefetch per pass */
        int64_t i = 0;
        for (int64_t pass = 0; i + 4 <= m; i += 4, pass++) {
            for (int64_t b = pass * share; b < (pass + 1) * share && b < bytes && next + b < end; b += 64)
                __builtin_prefetch(next + b, 0, 3);
            const float *x0 = x + i * k, *x1 = x0 + k, *x2 = x1 + k, *x3 = x2 + k;
            float a00 = 0, a01 = 0, a02 = 0, a03 = 0, a10 = 0, a11 = 0, a12 = 0, a13 = 0;
            float a20 = 0, a21 = 0, a22 = 0, a23 = 0, a30 = 0, a31 = 0, a32 = 0, a33 = 0;
            #pragma omp simd reduction(+:a00,a01,a02,a03,a10,a11,a12,a13,a20,a21,a22,a23,a30,a31,a32,a33)
            for (int64_t c = 0; c < k; c++) {
                const float w0 = r0[c], w1 = r1[c], w2 = r2[c], w3 = r3[c];
                const float v0 = x0[c], v1 = x1[c], v2 = x2[c], v3 = x3[c];
                a00 += v0 * w0; a01 += v0 * w1; a02 += v0 * w2; a03 += v0 * w3;
                a10 += v1 * w0; a11 += v1 * w1; a12 += v1 * w2; a13 += v1 * w3;
                a20 += v2 * w0; a21 += v2 * w1; a22 += v2 * w2; a23 += v2 * w3;
                a30 += v3 * w0; a31 += v3 * w1; a32 += v3 * w2; a33 += v3 * w3;
            }
            const float sums[4][4] = {{a00, a01, a02, a03}, {a10, a11, a12, a13}, {a20, a21, a22, a23}, {a30, a31, a32, a33}};
            for (int64_t u = 0; u < 4; u++)
                for (int64_t v = 0; v < 4; v++) {
                    const int64_t at = (i + u) * n + j + v;
                    out[at] = epilogue(sums[u][v] + (bias ? bias[j + v] : 0.0f), op, other, at);
                }
        }
        for (int64_t v = 0; v < 4; v++) rows_one_by_one(x, w + (j + v) * k, out, bias, other, i, m, n, k, j + v, op);
    }
    for (int64_t j = whole; j < n; j++) rows_one_by_one(x, w + j * k, out, bias, other, 0, m, n, k, j, op);
}

/* out[i, :] = x[i, :] / sqrt(mean(x[i, :]^2) + eps) * weight: RMSNorm (Llama), row by row, in fp32. */
void rms_norm(const float *x, const float *weight, float *out, int64_t rows, int64_t dim, float eps) {
    #pragma omp parallel for schedule(static) if (rows > 64)
    for (int64_t i = 0; i < rows; i++) {
        const float *xi = x + i * dim;
        float *oi = out + i * dim, squares = 0.0f;
        #pragma omp simd reduction(+:squares)
        for (int64_t d = 0; d < dim; d++) squares += xi[d] * xi[d];
        const float inverse = 1.0f / sqrtf(squares / (float)dim + eps);
        #pragma omp simd
        for (int64_t d = 0; d < dim; d++) oi[d] = xi[d] * inverse * weight[d];
    }
}

/* How many tokens ahead the attention asks for K/V rows: enough reads in flight to hide the
 * memory's latency while the current rows are used, few enough to stay in the L1 cache. */
enum { TOKENS_AHEAD = 8 };

static inline void prefetch(const float *at, int64_t bytes) {
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch((const char *)at + b, 0, 3);
}

/* Position `pos` of a request: its K (or V) row for every K/V head, found through its block table. */
static inline const float *token_row(const float *cache, const int64_t *table, int64_t pos, int64_t block_size,
                                     int64_t token_stride) {
    return cache + (table[pos / block_size] * block_size + pos % block_size) * token_stride;
}

/* One query token per request over its paged context: out[s, h] = softmax(q[s, h] . K / sqrt(d)) V.
 *
 * q, out: [num_seqs, num_heads, head_dim]. k_cache, v_cache: [slots, num_kv_heads, head_dim] (a
 * layer's pages, blocks flattened). Request s sees positions first_positions[s] (0 without a
 * sliding window) .. context_lens[s] - 1, in the blocks block_tables[s, :]. Query head h reads K/V
 * head h / (num_heads / num_kv_heads) (grouped-query attention). Two passes over the context: the
 * scores (each K row read once for all query heads), then the softmax-weighted sum of V rows.
 * The first pass asks for the K and V rows TOKENS_AHEAD positions ahead: a request's blocks lie
 * anywhere in the pool, where the CPU's own prefetcher cannot guess the next one. Threads split
 * the requests.
 */
void paged_decode_attention(const float *q, const float *k_cache, const float *v_cache,
                            const int64_t *block_tables, const int64_t *context_lens, const int64_t *first_positions,
                            float *out, int64_t num_seqs, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim,
                            int64_t block_size, int64_t max_blocks, float scale) {
    const int64_t group = num_heads / num_kv_heads, token_stride = num_kv_heads * head_dim;
    const int64_t row_bytes = token_stride * (int64_t)sizeof(float);
    int64_t longest = 1;
    for (int64_t s = 0; s < num_seqs; s++) longest = context_lens[s] > longest ? context_lens[s] : longest;
    #pragma omp parallel
    {
        float *scores = malloc(sizeof(float) * (size_t)(longest * num_heads));  /* [num_heads, context] */
        #pragma omp for schedule(static)
        for (int64_t s = 0; s < num_seqs; s++) {
            const int64_t *table = block_tables + s * max_blocks;
            const int64_t start = first_positions ? first_positions[s] : 0, n = context_lens[s] - start;
            const float *qs = q + s * num_heads * head_dim;
            float *os = out + s * num_heads * head_dim;
            for (int64_t t = 0; t < n; t++) {
                if (t + TOKENS_AHEAD < n) {  /* V too: the second pass then finds it in cache */
                    prefetch(token_row(k_cache, table, start + t + TOKENS_AHEAD, block_size, token_stride), row_bytes);
                    prefetch(token_row(v_cache, table, start + t + TOKENS_AHEAD, block_size, token_stride), row_bytes);
                }
                const float *key = token_row(k_cache, table, start + t, block_size, token_stride);
                for (int64_t h = 0; h < num_heads; h++) {
                    const float *qh = qs + h * head_dim, *kh = key + (h / group) * head_dim;
                    float dot = 0.0f;
                    #pragma omp simd reduction(+:dot)
                    for (int64_t d = 0; d < head_dim; d++) dot += qh[d] * kh[d];
                    scores[h * n + t] = dot * scale;
                }
            }
            for (int64_t h = 0; h < num_heads; h++) {  /* softmax, shifted by the row's largest score */
                float *row = scores + h * n, top = row[0], total = 0.0f;
                for (int64_t t = 1; t < n; t++) top = row[t] > top ? row[t] : top;
                #pragma omp simd reduction(+:total)
                for (int64_t t = 0; t < n; t++) {
                    row[t] = expf(row[t] - top);
                    total += row[t];
                }
                const float inverse = 1.0f / total;
                #pragma omp simd
                for (int64_t t = 0; t < n; t++) row[t] *= inverse;
            }
            for (int64_t x = 0; x < num_heads * head_dim; x++) os[x] = 0.0f;
            for (int64_t t = 0; t < n; t++) {
                const float *value = token_row(v_cache, table, start + t, block_size, token_stride);
                for (int64_t h = 0; h < num_heads; h++) {
                    const float p = scores[h * n + t], *vh = value + (h / group) * head_dim;
                    float *oh = os + h * head_dim;
                    #pragma omp simd
                    for (int64_t d = 0; d < head_dim; d++) oh[d] += p * vh[d];
                }
            }
        }
        free(scores);
    }
}
