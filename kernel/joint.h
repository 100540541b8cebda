/* What joint.c gives the rest of the search: the joint bound on terms 0 and 1 together
 * (docs/algorithm.md, "The joint bound"), planned when a position's terms are read
 * (lists.c) and taken in place of those two terms' bounds when the bound is computed
 * (search.c). */
#ifndef FASTSUBS_JOINT_H
#define FASTSUBS_JOINT_H

#include "searcher.h"

/* Whether the joint bound applies at the position whose ``n_terms`` terms, steps, patterns
 * and alternatives ``searcher`` holds (the unigram list started, not yet the joint one):
 * the pattern "_ d" of term 1 whose joint order the search is to read as one more sorted
 * list, or NULL.  When it does, sets searcher->joint_alt and searcher->joint_slack.
 *
 * First checks, in every build, the invariants the bound rests on: term 0's last
 * alternative is its unigram base, and term 1's base is a constant.  The search's own code
 * makes them (terms.c, lists.c), whatever the index holds, so a broken one is a bug there:
 * it stops the process with a message rather than let a wrong bound through. */
const SearchPattern *joint_plan(Searcher *searcher, int n_terms);

/* A bound on t_0(x) + t_1(x) over some unread words x, and the lists (up to two, NONE where
 * fewer) whose reading may lower it: they bind it.  ``start``: the alternative of term 0 whose
 * pair list (lists_start_pair) would lower it (NONE: none); the caller starts it and asks
 * again. */
typedef struct {
    double value;
    int binds[2];
    int start;
} PairBound;

/* Searcher.pair_lists of an alternative whose pair list is not to be started (out of memory
 * for its order, or a search that does not split): its words in "_ d" stay bounded by "_ d"'s
 * own list. */
#define NO_PAIR (-2)

/* Searches for fewer substitutes than this do not split the class "x in a pattern P of term
 * 0" (in_a_pattern): they read so few words that starting pair lists costs more than they
 * save (docs/performance.md, "Tuning"). */
#define PAIR_MIN_COUNT 10

/* Where the plan applies (searcher->joint_list set): the bound on t_0(x) + t_1(x) of every
 * unread word, summed so that it holds for the rounded scores too, with the lists that bind
 * it; *runner_up: the bound of the next largest class of words (the estimate of bind() in
 * search.c).  Sets searcher->term_sup[0] and [1], each term's own bound, which pruning
 * uses. */
PairBound joint_bound(Searcher *searcher, double *runner_up);

#endif
