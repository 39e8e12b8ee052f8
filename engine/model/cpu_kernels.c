/* CPU kernels for the steps where PyTorch's general-purpose ops waste the most: a decode step.
 *
 * A decode step multiplies a few rows (one per request) by every weight of the model, and attends
 * one query per request over its paged K/V. Both are bound by memory, not arithmetic: the step
 * must read ~0.5 GB of weights and every request's K/V once. What these kernels do differently:
 *
 *   small_batch_linear      streams each weight row once for all input rows, asks for the rows
 *                           ahead before it needs them (so the memory system always has reads in
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

/* One weight row (number j) against every input row: a last odd row, or any k the pairs below don't take. */
static void rows_one_by_one(const float *x, const float *row, float *out, const float *bias, const float *other,
                            int64_t m, int64_t n, int64_t k, int64_t j, int64_t op) {
    for (int64_t i = 0; i < m; i++) {
        const float *xi = x + i * k;
        float acc = 0.0f;
        #pragma omp simd reduction(+:acc)
        for (int64_t c = 0; c < k; c++) acc += xi[c] * row[c];
        if (bias) acc += bias[j];
        out[i * n + j] = epilogue(acc, op, other, i * n + j);
    }
}

/* Sixteen floats: one AVX-512 register (two AVX2 ones), written with GCC's vector extension. */
typedef float vec16 __attribute__((vector_size(64), aligned(4)));
/* ROWS_AT_ONCE input rows share each weight value loaded (a decode step's batch of 8: all of them);
 * WEIGHT_ROWS_AHEAD: how far ahead in the weight the reads are asked for. */
enum { LANES = 16, ROWS_AT_ONCE = 8, WEIGHT_ROWS_AHEAD = 8 };

static inline vec16 load16(const float *p) { vec16 v; __builtin_memcpy(&v, p, sizeof v); return v; }
static inline float lanes_sum(vec16 v) { float s = 0.0f; for (int t = 0; t < LANES; t++) s += v[t]; return s; }

/* Weight rows j and j + 1 (r0, r1) against input rows 0 .. rows - 1 of x (rows <= ROWS_AT_ONCE), k % LANES == 0.
 * Two weight rows by eight input rows: sixteen independent sums in registers, two weight loads for
 * sixteen multiply-adds. Each step along k also asks for the cache line of the weight rows
 * WEIGHT_ROWS_AHEAD further on: reads from memory stay in flight, one line at a time, all along.
 * They are asked into the L2 cache, not L1 (prefetcht1): on an AMD EPYC the whole model's
 * projections for 8 rows took 21-28 ms instead of 32-38 with the lines asked into L1 (runs
 * alternating; the distance ahead, 8 to 32 rows, mattered less). */
static inline __attribute__((always_inline)) void pair_against_rows(
        const float *x, const float *r0, const float *r1, const float *ahead, const float *bias, const float *other,
        float *out, int64_t rows, int64_t n, int64_t k, int64_t j, int64_t op) {
    vec16 acc0[ROWS_AT_ONCE], acc1[ROWS_AT_ONCE];
    for (int i = 0; i < ROWS_AT_ONCE; i++) { acc0[i] = (vec16){0}; acc1[i] = (vec16){0}; }
    for (int64_t c = 0; c < k; c += LANES) {
        __builtin_prefetch(ahead + c, 0, 2);
        __builtin_prefetch(ahead + k + c, 0, 2);
        const vec16 w0 = load16(r0 + c), w1 = load16(r1 + c);
        #pragma GCC unroll 8
        for (int i = 0; i < ROWS_AT_ONCE; i++)
            if (i < rows) { const vec16 xi = load16(x + i * k + c); acc0[i] += xi * w0; acc1[i] += xi * w1; }
    }
    for (int64_t i = 0; i < rows; i++) {
        out[i * n + j] = epilogue(lanes_sum(acc0[i]) + (bias ? bias[j] : 0.0f), op, other, i * n + j);
        out[i * n + j + 1] = epilogue(lanes_sum(acc1[i]) + (bias ? bias[j + 1] : 0.0f), op, other, i * n + j + 1);
    }
}

/* out[m, n] = op(x[m, k] @ w[n, k]^T + bias) for a few rows m (a decode step's batch).
 *
 * Threads split the weight rows, two at a time; each pair meets every input row (eight at a time)
 * while it is in the L1 cache, so the weight is read from memory once per call. Measured against
 * the earlier four-by-four blocks with a burst of prefetches per block: ~10% faster for a
 * SmolLM2-135M decode step's projections (8 rows). An odd last row, or k not a multiple of
 * sixteen, goes row by row.
 */
void small_batch_linear(const float *x, const float *w, const float *bias, const float *other, float *out,
                        int64_t m, int64_t n, int64_t k, int64_t op) {
    const int64_t paired = k % LANES ? 0 : n - n % 2;
    #pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < paired; j += 2) {
        const float *r0 = w + j * k, *ahead = w + (j + WEIGHT_ROWS_AHEAD + 2 <= n ? j + WEIGHT_ROWS_AHEAD : j) * k;
        for (int64_t i0 = 0; i0 < m; i0 += ROWS_AT_ONCE)
            pair_against_rows(x + i0 * k, r0, r0 + k, ahead, bias, other ? other + i0 * n : NULL, out + i0 * n,
                              m - i0 < ROWS_AT_ONCE ? m - i0 : ROWS_AT_ONCE, n, k, j, op);
    }
    for (int64_t j = paired; j < n; j++) rows_one_by_one(x, w + j * k, out, bias, other, m, n, k, j, op);
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
