/* Building a position's terms from pattern records: see terms.h (and bench/reference_terms.py,
 * its Python reference). */
#include "terms.h"

#include <stdlib.h>
#include <string.h>


/* ``(alpha, beta)`` of the n-gram ids[0 .. n): 1, 0 when the model lacks it, -1 on error. */
static int ngram(Reader *r, const uint32_t *ids, int n, double *alpha, double *beta) {
    const Store *s = r->store;
    if (n == 1) {
        if (ids[0] >= s->vocab_size)
            return 0;
        *alpha = s->unigram_alpha[ids[0]];
        *beta = s->unigram_beta[ids[0]];
        return 1;
    }
    const CacheSlot *rec = cache_reader_pattern(r, n - 1, ids, n - 1);
    if (!rec)
        return r->failure.code ? -1 : 0;
    int32_t at = ids[n - 1] < s->vocab_size ? cache_slot_find(s, rec, ids[n - 1]) : -1;
    if (at < 0)
        return 0;
    DiskPattern p;
    cache_slot_pattern(s, rec, &p);
    *alpha = p.alpha[at];
    *beta = p.beta_table ? (double)pattern_beta(&p, (uint32_t)at) : 0.0;
    return 1;
}

/* log10 p(word | context[0 .. n)) by the ARPA back-off recursion, for fixed words, summed
 * as the recursion nests: beta(h) + (beta(h') + (... + alpha)), innermost first.  Float64
 * sums of float32 values are exact only while their exponents stay close; summed in another
 * order, weights of very different sizes (1e-16 beside 1) round differently from the
 * definition (docs/algorithm.md, "Rounding"). */
static int logprob(Reader *r, uint32_t word, const uint32_t *context, int n, double *result) {
    uint32_t ids[256];
    double betas[256], value = UNKNOWN_WORD_LOGPROB, alpha, beta;
    int n_betas = 0;
    for (int start = 0; start <= n; start++) {
        int len = n - start;
        memcpy(ids, context + start, (size_t)len * sizeof(uint32_t));
        ids[len] = word;
        int found = ngram(r, ids, len + 1, &alpha, &beta);
        if (found < 0)
            return -1;
        if (found) {
            value = alpha;
            break;
        }
        if (start < n) {
            found = ngram(r, context + start, len, &alpha, &beta);
            if (found < 0)
                return -1;
            betas[n_betas++] = found ? beta : 0.0;
        }
    }
    while (n_betas)
        value = betas[--n_betas] + value;
    *result = value;
    return 0;
}

static StepPlan *new_step(PositionTerms *t) {
    if (GROW(t->steps, t->cap_steps, t->n_steps + 1) < 0)
        return NULL;
    StepPlan *step = &t->steps[t->n_steps++];
    memset(step, 0, sizeof(*step));
    return step;
}

/* log10 p(x | history[0 .. n)): steps ``history[k:] _`` for k = 0 ... n - 1, then the
 * unigram alpha of x. */
static int predicting_term(Reader *r, const uint32_t *history, int n, PositionTerms *t, TermPlan *term) {
    term->base_unigram = 1;
    term->base = 0.0;
    for (int k = 0; k < n; k++) {
        StepPlan *step = new_step(t);
        double alpha, beta = 0.0;
        int found = step ? ngram(r, history + k, n - k, &alpha, &beta) : -1;
        if (found < 0)
            return -1;
        step->alpha = cache_reader_pattern(r, n - k, history + k, n - k);
        if (!step->alpha && r->failure.code)
            return -1;
        step->beta_kind = BETA_CONST;
        step->beta_const = found ? beta : 0.0;
    }
    return 0;
}

/* log10 p(word | left x right): steps ``left[k:] _ right word`` for k = 0 ... n_left,
 * then the probability of word once x has dropped out of its context. */
static int context_term(Reader *r, const uint32_t *left, int n_left, const uint32_t *right, int n_right,
                        uint32_t word, PositionTerms *t, TermPlan *term) {
    uint32_t ids[256];
    term->base_unigram = 0;
    for (int k = 0; k <= n_left; k++) {
        int slot = n_left - k, n = slot + n_right;
        memcpy(ids, left + k, (size_t)slot * sizeof(uint32_t));
        memcpy(ids + slot, right, (size_t)n_right * sizeof(uint32_t));
        ids[n] = word;
        StepPlan *step = new_step(t);
        if (!step)
            return -1;
        step->alpha = cache_reader_pattern(r, slot, ids, n + 1);
        if (!step->alpha && r->failure.code)
            return -1;
        if (n) {
            step->beta = cache_reader_pattern(r, slot, ids, n);
            if (!step->beta && r->failure.code)
                return -1;
            step->beta_kind = step->beta ? BETA_PATTERN : BETA_CONST;
            step->beta_const = 0.0;
        } else {
            step->beta_kind = BETA_UNIGRAM;
        }
    }
    return logprob(r, word, right, n_right, &term->base);
}

/* The cache slots of the patterns terms_position looks up for ``target``, prefetched: the
 * patterns of each term's steps (context_term's and predicting_term's) and of the fixed
 * n-grams (ngram's, logprob's every back-off level: it stops at the first it finds). */
void terms_prefetch(const Reader *r, const uint32_t *sentence, int n, int target) {
    int order = r->store->order;
    int end = target + order < n ? target + order : n;
    for (int j = target; j < end; j++) {
        int first = j - order + 1 > 0 ? j - order + 1 : 0, n_left = target - first;
        const uint32_t *left = sentence + first;
        if (j == target) {
            for (int k = 0; k < n_left; k++) {
                cache_reader_prefetch(r, n_left - k - 1, left + k, n_left - k - 1);
                cache_reader_prefetch(r, n_left - k, left + k, n_left - k);
            }
            continue;
        }
        uint32_t ids[256];
        const uint32_t *right = sentence + target + 1;
        int n_right = j - target - 1;
        for (int k = n_left; k >= 0; k--) {  /* (in any order: these only prefetch) */
            int slot = n_left - k, m = slot + n_right;
            memcpy(ids, left + k, (size_t)slot * sizeof(uint32_t));
            memcpy(ids + slot, right, (size_t)n_right * sizeof(uint32_t));
            ids[m] = sentence[j];
            cache_reader_prefetch(r, slot, ids, m + 1);
            cache_reader_prefetch(r, slot, ids, m);
        }
        for (int start = 0; start <= n_right; start++) {
            int len = n_right - start;
            memcpy(ids, right + start, (size_t)len * sizeof(uint32_t));
            ids[len] = sentence[j];
            cache_reader_prefetch(r, len, ids, len);
            cache_reader_prefetch(r, len - 1, right + start, len - 1);
        }
    }
}

int terms_position(Reader *r, const uint32_t *sentence, int n, int target, PositionTerms *out) {
    int order = r->store->order;
    int last = target + order < n ? target + order : n;
    out->n_terms = out->n_steps = 0;
    if (GROW(out->terms, out->cap_terms, last - target) < 0) {
        common_fail(&r->failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    for (int j = target; j < last; j++) {
        /* the term of s_j depends on the words left of x in its n-gram and those after */
        int first = j - order + 1 > 0 ? j - order + 1 : 0;
        TermPlan *term = &out->terms[out->n_terms++];
        term->first = out->n_steps;
        int rc = j == target ? predicting_term(r, sentence + first, target - first, out, term)
                             : context_term(r, sentence + first, target - first, sentence + target + 1,
                                            j - target - 1, sentence[j], out, term);
        if (rc < 0) {
            if (!r->failure.code)
                common_fail(&r->failure, FS_ENOMEM, "out of memory");
            return -1;
        }
        term->n = out->n_steps - term->first;
    }
    return 0;
}

void terms_position_free(PositionTerms *t) {
    free(t->terms);
    free(t->steps);
    memset(t, 0, sizeof(*t));
}
