#include "CModExp.h"
#include <string.h>

typedef unsigned __int128 u128;
enum { MAX_LIMBS = 64 };

/// -m^-1 mod 2^64 for odd m (Newton's iteration doubles the correct bits each step).
static uint64_t negative_inverse(uint64_t m) {
    uint64_t inverse = 1;
    for (int i = 0; i < 6; i++) inverse *= 2 - m * inverse;
    return (uint64_t)0 - inverse;
}

/// a >= b, both `limbs` long.
static int at_least(const uint64_t *a, const uint64_t *b, size_t limbs) {
    for (size_t i = limbs; i-- > 0;) {
        if (a[i] != b[i]) return a[i] > b[i];
    }
    return 1;
}

static void subtract(uint64_t *a, const uint64_t *b, size_t limbs) {
    uint64_t borrow = 0;
    for (size_t i = 0; i < limbs; i++) {
        u128 difference = (u128)a[i] - b[i] - borrow;
        a[i] = (uint64_t)difference;
        borrow = (uint64_t)(difference >> 64) ? 1 : 0;
    }
}

/// x unchanged, but opaque to the optimizer: without it clang -O2 turns a mask select on a secret bit back into a
/// branch (seen with the constant-time check in Tests/ConstantTime).
static inline uint64_t value_barrier(uint64_t x) {
    __asm__ volatile("" : "+r"(x));
    return x;
}

/// t -= n when t (with its carry limb `top`) is at least n, else t stays: the same instructions and memory
/// accesses either way (a mask selects), so the time never tells which happened. t is secret-dependent in every
/// multiplication by the base or the accumulator; a branch here would leak the exponent's bits over time.
static void subtract_if_at_least(uint64_t *t, uint64_t top, const uint64_t *n, size_t limbs) {
    uint64_t difference[MAX_LIMBS];
    uint64_t borrow = 0;
    for (size_t i = 0; i < limbs; i++) {
        u128 wide = (u128)t[i] - n[i] - borrow;
        difference[i] = (uint64_t)wide;
        borrow = (uint64_t)(wide >> 64) & 1;  // the high half is all ones after a borrow, else zero
    }
    uint64_t top_set = (top | ((uint64_t)0 - top)) >> 63;  // 1 when top != 0, without a comparison
    uint64_t keep_difference = value_barrier((uint64_t)0 - ((borrow ^ 1) | top_set));
    for (size_t i = 0; i < limbs; i++) t[i] = (difference[i] & keep_difference) | (t[i] & ~keep_difference);
}

/// r = a·b·2^(-64·limbs) mod n (CIOS). r may alias a or b.
static void montgomery_multiply(const uint64_t *a, const uint64_t *b, const uint64_t *n, uint64_t n_inverse,
                                size_t limbs, uint64_t *r) {
    uint64_t t[MAX_LIMBS + 2];
    memset(t, 0, sizeof(uint64_t) * (limbs + 2));
    for (size_t i = 0; i < limbs; i++) {
        u128 carry = 0;
        for (size_t j = 0; j < limbs; j++) {
            carry = (u128)a[j] * b[i] + t[j] + (uint64_t)(carry >> 64);
            t[j] = (uint64_t)carry;
        }
        u128 top = (u128)t[limbs] + (uint64_t)(carry >> 64);
        t[limbs] = (uint64_t)top;
        t[limbs + 1] = (uint64_t)(top >> 64);
        uint64_t m = t[0] * n_inverse;
        carry = (u128)m * n[0] + t[0];
        for (size_t j = 1; j < limbs; j++) {
            carry = (u128)m * n[j] + t[j] + (uint64_t)(carry >> 64);
            t[j - 1] = (uint64_t)carry;
        }
        top = (u128)t[limbs] + (uint64_t)(carry >> 64);
        t[limbs - 1] = (uint64_t)top;
        t[limbs] = t[limbs + 1] + (uint64_t)(top >> 64);
    }
    subtract_if_at_least(t, t[limbs], n, limbs);
    memcpy(r, t, sizeof(uint64_t) * limbs);
}

int lbs_modexp(const uint64_t *base, const uint64_t *exponent, size_t exponent_limbs,
               const uint64_t *modulus, size_t limbs, uint64_t *result) {
    if (limbs == 0 || limbs > MAX_LIMBS || (modulus[0] & 1) == 0) return -1;
    uint64_t n_inverse = negative_inverse(modulus[0]);
    // R² mod n by doubling 1 (2·64·limbs times), then the Montgomery forms of 1 and of the base.
    uint64_t r2[MAX_LIMBS] = {0}, one[MAX_LIMBS] = {0}, base_m[MAX_LIMBS], acc[MAX_LIMBS], pick[MAX_LIMBS];
    r2[0] = 1;
    for (size_t i = 0; i < 128 * limbs; i++) {
        uint64_t carry = 0;
        for (size_t j = 0; j < limbs; j++) {
            uint64_t next = r2[j] >> 63;
            r2[j] = (r2[j] << 1) | carry;
            carry = next;
        }
        // The modulus is public: branching on it tells nothing.
        if (carry || at_least(r2, modulus, limbs)) subtract(r2, modulus, limbs);
    }
    one[0] = 1;
    montgomery_multiply(base, r2, modulus, n_inverse, limbs, base_m);
    montgomery_multiply(one, r2, modulus, n_inverse, limbs, acc);
    uint64_t one_m[MAX_LIMBS];
    memcpy(one_m, acc, sizeof(uint64_t) * limbs);
    for (size_t i = exponent_limbs; i-- > 0;) {
        for (int bit = 63; bit >= 0; bit--) {
            montgomery_multiply(acc, acc, modulus, n_inverse, limbs, acc);
            uint64_t mask = value_barrier((uint64_t)0 - ((exponent[i] >> bit) & 1));
            for (size_t j = 0; j < limbs; j++) pick[j] = (base_m[j] & mask) | (one_m[j] & ~mask);
            montgomery_multiply(acc, pick, modulus, n_inverse, limbs, acc);
        }
    }
    montgomery_multiply(acc, one, modulus, n_inverse, limbs, result);
    return 0;
}
