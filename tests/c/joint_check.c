/* joint_check: joint_plan (kernel/joint.c) on the terms of one position of a 4-gram model,
 * made by hand as lists_read_terms makes them, or with one of the invariants the joint bound
 * rests on broken (tests/test_joint_plan.py).
 *
 *   joint_check CASE VALUE_BOUND
 *
 * The position "a x d": term 0 predicts x (step "a _", then its unigram base), term 1 predicts
 * d (steps "a _ d", then "_ d", whose pattern carries a joint order, then a constant base).
 * CASE "sound" leaves them so and writes the alternative of term 1 that joint_plan picks and
 * its slack, exactly (C99 hexadecimal, as Python's float.fromhex reads it), for an index whose
 * value bound is VALUE_BOUND.  Each other CASE breaks one invariant: "term-0-constant-base"
 * (term 0 ends in a constant, not in the unigram alpha of x), "term-0-base-not-last" (its
 * unigram alternative first), "term-1-unigram-base" (term 1 ends in the unigram alpha of x);
 * joint_plan must stop the process (abort) with its message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "joint.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fputs("usage: joint_check CASE VALUE_BOUND\n", stderr);
        return 2;
    }
    const char *which = argv[1];
    Store store;
    memset(&store, 0, sizeof(store));
    store.order = 4;
    store.value_bound = strtod(argv[2], NULL);
    static const uint8_t joint_order[1];
    /* patterns: "a _" (0), "a _ d" (1), "_ d" (2, with a joint order); lists: those three, the unigram list (3) */
    SearchPattern pats[3];
    memset(pats, 0, sizeof(pats));
    pats[2].data.joint = joint_order;
    SearchStep steps[3];
    memset(steps, 0, sizeof(steps));
    for (int i = 0; i < 3; i++) {
        steps[i].alpha = i;
        steps[i].list = i;
    }
    SearchTerm terms[2];
    memset(terms, 0, sizeof(terms));
    terms[0] = (SearchTerm){.first = 0, .n = 1, .base_unigram = 1, .first_alt = 0, .n_alts = 2, .fixed = -INFINITY};
    terms[1] = (SearchTerm){.first = 1, .n = 2, .base_unigram = 0, .base = -2.0, .first_alt = 2, .n_alts = 2};
    Alt alts[4] = {{0, 0}, {3, 1}, {1, 0}, {2, 1}};
    if (!strcmp(which, "term-0-constant-base")) {
        terms[0].base_unigram = 0;
        terms[0].n_alts = 1;
    } else if (!strcmp(which, "term-0-base-not-last")) {
        alts[0] = (Alt){3, 1};
        alts[1] = (Alt){0, 0};
    } else if (!strcmp(which, "term-1-unigram-base")) {
        terms[1].base_unigram = 1;
    } else if (strcmp(which, "sound")) {
        fprintf(stderr, "joint_check: no case %s\n", which);
        return 2;
    }
    Searcher searcher;
    memset(&searcher, 0, sizeof(searcher));
    searcher.reader.store = &store;
    searcher.pats = pats;
    searcher.steps = steps;
    searcher.terms = terms;
    searcher.alts = alts;
    searcher.unigram_list = 3;
    const SearchPattern *d = joint_plan(&searcher, 2);
    if (d != &pats[2]) {
        fprintf(stderr, "joint_check: joint_plan did not pick \"_ d\"\n");
        return 1;
    }
    printf("%d %a\n", searcher.joint_alt, searcher.joint_slack);
    return 0;
}
