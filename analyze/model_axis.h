/* The findings model's x axis (model_axis.c): time (ns), the event index,
 * or the marks axis (a number the program wrote in its marks, "hour 3"),
 * and the timeline's column of an x.
 *
 * A part of model.h, included by it (include model.h, not this). */
#ifndef MEMSNAP_ANALYZE_MODEL_AXIS_H
#define MEMSNAP_ANALYZE_MODEL_AXIS_H
#ifndef MEMSNAP_ANALYZE_MODEL_H
#error "include analyze/model.h"
#endif

/* SM_X_AUTO: chosen at the end of pass 1 (sm_x_auto says how): the event
 * index when most events fall in a small part of the time (a training
 * run's slow first forward fills the time axis and every later step is a
 * sliver), else time. */
enum sm_x { SM_X_TIME = 0, SM_X_EVENTS, SM_X_MARKS, SM_X_AUTO };
/* x units per unit of a mark's value on the SM_X_MARKS axis */
#define SM_MARK_SCALE 1000000.0
enum sm_from { SM_FROM_FIRST = 0, SM_FROM_ZERO };

/* x range of the timeline: [x_lo, x_hi] in ns or event index.  In time
 * mode x_lo is the first event's or the first counters sample's time,
 * whichever is earlier (x_from = SM_FROM_FIRST), or 0 (SM_FROM_ZERO): a
 * recorder's t0 is when the process started, often seconds before the
 * first CUDA allocation. */
void sm_x_range(const sm_model *m, uint64_t *lo, uint64_t *hi);
/* Replaces the x range (compare puts several snapshots on one axis); call
 * between pass 1 and pass 2.  lo < hi. */
void sm_set_x_range(sm_model *m, uint64_t lo, uint64_t hi);
/* The x of event #idx (1-based, file order) at time t_ns in the model's
 * x mode: t_ns, idx - 1, or the mark value there (SM_X_MARKS). */
uint64_t sm_x_of_event(const sm_model *m, uint64_t idx, uint64_t t_ns);
/* The marks axis (SM_X_MARKS) after pass 1: the number of marks whose
 * value was read (0: the axis has nothing to stand on) and the word read
 * ("hour"; "" for bare numbers). */
size_t sm_marks(const sm_model *m, const char **word);
/* A number read from a mark's text: with word non-empty, the number that
 * follows the first whole word `word` (case-insensitive; spaces, ':' or
 * '=' between); with word empty, the number after the first word followed
 * by one (that word goes to found, cap bytes), or a text that starts with a
 * number.  0 ok with *v set, -1 no such number. */
int sm_mark_value(const char *text, const char *word, double *v, char *found,
                  size_t cap);
/* With SM_X_AUTO (sm_opts.x_mode, now time or events): 1 and how the
 * events fell, the smallest share of the time (*time_share, of the time
 * axis's range) holding *event_share of the events, and that time's first
 * and last event (*t_lo, *t_hi); 0 when the axis was given. */
int sm_x_auto(const sm_model *m, double *event_share, double *time_share, uint64_t *t_lo,
              uint64_t *t_hi);
/* Sets the x mode between pass 1 and pass 2 (compare: one axis for several
 * files): SM_X_TIME or SM_X_EVENTS. */
void sm_set_x_mode(sm_model *m, int mode);
/* The NVTX marks the file has (every x mode), in file order: *n of them;
 * mark i's event index, time and text (sm_mark_at: 0, or -1 out of range). */
size_t sm_nmarks_all(const sm_model *m);
int sm_mark_at(const sm_model *m, size_t i, uint64_t *ev_idx, uint64_t *t_ns, const char **text);
/* On the marks axis: the events before its first mark (drawn at its
 * place), that mark's event index (0: none); else 0. */
uint64_t sm_marks_before(const sm_model *m, uint64_t *first_mark_ev);
/* Column of an x value (clamped to the columns). */
int sm_col_of(const sm_model *m, uint64_t x);

#endif
