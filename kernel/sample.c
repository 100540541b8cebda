/* The draws of --sample: see sample.h. */
#include "sample.h"

/* numpy/random/bit_generator.pyx: SeedSequence's constants. */
#define INIT_A 0x43b0d7e5u
#define MULT_A 0x931e8875u
#define INIT_B 0x8b51f9ddu
#define MULT_B 0x58f38dedu
#define MIX_MULT_L 0xca01f9ddu
#define MIX_MULT_R 0x4973f715u
#define XSHIFT 16
#define POOL_SIZE 4

typedef unsigned __int128 u128;

/* The 32-bit words of the entropy [seed, line, position], each number little-endian, 0 as one word. */
static int entropy_words(const uint64_t *numbers, int n, uint32_t *words) {
    int count = 0;
    for (int i = 0; i < n; i++) {
        uint64_t v = numbers[i];
        do {
            words[count++] = (uint32_t)v;
            v >>= 32;
        } while (v);
    }
    return count;
}

static uint32_t hashmix(uint32_t value, uint32_t *hash_const) {
    value ^= *hash_const;
    *hash_const *= MULT_A;
    value *= *hash_const;
    return value ^ value >> XSHIFT;
}

static uint32_t mix(uint32_t x, uint32_t y) {
    uint32_t result = MIX_MULT_L * x - MIX_MULT_R * y;
    return result ^ result >> XSHIFT;
}

/* SeedSequence(entropy).generate_state(4, uint64) as 8 words. */
static void seed_state(const uint32_t *entropy, int n, uint32_t state[8]) {
    uint32_t pool[POOL_SIZE], hash_const = INIT_A;
    for (int i = 0; i < POOL_SIZE; i++)
        pool[i] = hashmix(i < n ? entropy[i] : 0, &hash_const);
    for (int source = 0; source < POOL_SIZE; source++)
        for (int target = 0; target < POOL_SIZE; target++)
            if (source != target)
                pool[target] = mix(pool[target], hashmix(pool[source], &hash_const));
    for (int source = POOL_SIZE; source < n; source++)
        for (int target = 0; target < POOL_SIZE; target++)
            pool[target] = mix(pool[target], hashmix(entropy[source], &hash_const));
    hash_const = INIT_B;
    for (int i = 0; i < 8; i++) {
        uint32_t value = pool[i % POOL_SIZE] ^ hash_const;
        hash_const *= MULT_B;
        value *= hash_const;
        state[i] = value ^ value >> XSHIFT;
    }
}

/* PCG64: a 128-bit linear congruential state, output by XSL-RR. */
typedef struct {
    u128 state, inc;
} Pcg64;

static const u128 PCG_MULTIPLIER = ((u128)2549297995355413924ull << 64) + 4865540595714422341ull;

static void pcg_step(Pcg64 *g) {
    g->state = g->state * PCG_MULTIPLIER + g->inc;
}

static void pcg_seed(Pcg64 *g, const uint32_t state[8]) {
    uint64_t v[4];
    for (int i = 0; i < 4; i++)
        v[i] = state[2 * i] | (uint64_t)state[2 * i + 1] << 32;
    g->state = 0;
    g->inc = (((u128)v[2] << 64 | v[3]) << 1) | 1;
    pcg_step(g);
    g->state += (u128)v[0] << 64 | v[1];
    pcg_step(g);
}

static double pcg_double(Pcg64 *g) {
    pcg_step(g);
    uint64_t folded = (uint64_t)(g->state >> 64) ^ (uint64_t)g->state;
    unsigned rotation = (unsigned)(g->state >> 122);
    uint64_t next = folded >> rotation | folded << ((64 - rotation) & 63);
    return (double)(next >> 11) * (1.0 / 9007199254740992.0);
}

void sample_draws(const double *probabilities, int64_t n, uint64_t seed, uint64_t line, uint64_t position,
                  int64_t draws, int64_t *out, double *cumulative) {
    uint64_t numbers[3] = {seed, line, position};
    uint32_t entropy[6], state[8];
    seed_state(entropy, entropy_words(numbers, 3, entropy), state);
    Pcg64 g;
    pcg_seed(&g, state);
    double total = 0.0;
    for (int64_t i = 0; i < n; i++)
        cumulative[i] = total += probabilities[i];
    for (int64_t i = 0; i < n; i++)
        cumulative[i] /= total;
    for (int64_t d = 0; d < draws; d++) {
        double u = pcg_double(&g);
        int64_t low = 0, high = n;  /* the first whose cumulative probability is above u */
        while (low < high) {
            int64_t mid = low + (high - low) / 2;
            if (cumulative[mid] <= u)
                low = mid + 1;
            else
                high = mid;
        }
        out[d] = low < n ? low : n - 1;
    }
}
