/* The findings model's x axis (model_axis.h): time, event index, or the
 * marks axis, where x is a number the program wrote in its marks (NVTX
 * marks, memsnap.annotate: "hour 3", "step=120") and runs linearly in the
 * event index between two marks; and the timeline's column of an x.
 */
#include "model_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int is_word_ch(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* The number at s after spaces, ':' or '=' (at most 3 of them): 0 ok. */
static int number_after(const char *s, double *v)
{
    int k = 0;
    while ((*s == ' ' || *s == ':' || *s == '=') && k < 3) {
        s++;
        k++;
    }
    if (!((*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9')))
        return -1;
    char *end;
    double d = strtod(s, &end);
    if (end == s || d != d)
        return -1;
    *v = d;
    return 0;
}

int sm_mark_value(const char *text, const char *word, double *v, char *found,
                  size_t cap)
{
    if (!text)
        return -1;
    if (found && cap)
        found[0] = '\0';
    if (!word || !*word) {
        const char *p = text;
        while (*p == ' ')
            p++;
        if (!number_after(p, v))
            return 0;
    }
    size_t wl = word ? strlen(word) : 0;
    for (const char *p = text; *p; p++) {
        if (!is_word_ch(*p) || (p > text && is_word_ch(p[-1])))
            continue;
        const char *e = p;
        while (is_word_ch(*e))
            e++;
        if (wl && ((size_t)(e - p) != wl || strncasecmp(p, word, wl))) {
            p = e - 1;
            continue;
        }
        if (!number_after(e, v)) {
            if (found && cap)
                snprintf(found, cap, "%.*s", (int)(e - p), p);
            return 0;
        }
        p = e - 1;
    }
    return -1;
}

/* x units of a mark value: value x SM_MARK_SCALE, negative values at 0. */
static uint64_t mark_x(double v)
{
    double x = v * SM_MARK_SCALE;
    if (!(x > 0))
        return 0;
    return x >= 1.8e19 ? UINT64_MAX / 2 : (uint64_t)x;
}

/* Pass 1: a mark at event idx, its text the string str (read after pass 1,
 * when every str line is known).  0 ok, -1 out of memory. */
int sm__mark_add(sm_model *m, uint64_t idx, uint64_t t_ns, uint32_t str)
{
    if (msnap_grow((void **)&m->mark_ev, &m->cap_mark_ev, m->nmark_raw, sizeof *m->mark_ev) ||
        msnap_grow((void **)&m->mark_t, &m->cap_mark_t, m->nmark_raw, sizeof *m->mark_t) ||
        msnap_grow((void **)&m->mark_str, &m->cap_mark_str, m->nmark_raw, sizeof *m->mark_str))
        return -1;
    m->mark_ev[m->nmark_raw] = idx;
    m->mark_t[m->nmark_raw] = t_ns;
    m->mark_str[m->nmark_raw++] = str;
    return 0;
}

size_t sm_nmarks_all(const sm_model *m)
{
    return m->nmark_raw;
}

int sm_mark_at(const sm_model *m, size_t i, uint64_t *ev_idx, uint64_t *t_ns, const char **text)
{
    if (i >= m->nmark_raw)
        return -1;
    *ev_idx = m->mark_ev[i];
    *t_ns = m->mark_t[i];
    *text = sm_str(m, m->mark_str[i]);
    return 0;
}

uint64_t sm_marks_before(const sm_model *m, uint64_t *first_mark_ev)
{
    *first_mark_ev = 0;
    if (m->o.x_mode != SM_X_MARKS || !m->nanc)
        return 0;
    /* the first anchor may be the implicit origin (the first event, value
     * 0): the events before the first real mark then have a place */
    size_t k = m->nanc > m->nmarks ? 1 : 0;
    if (k)
        return 0;
    *first_mark_ev = m->anc_ev[0];
    return m->anc_ev[0] > 1 ? m->anc_ev[0] - 1 : 0;
}

/* ---- SM_X_AUTO -------------------------------------------------------- */

/* Events per stretch of time from the first event on, SM_TBINS stretches
 * of tbin_w ns; a stretch's width doubles (neighbours merged) when an
 * event falls past the last one, so the histogram stays SM_TBINS wide
 * whatever the run's length.  Out of order (earlier than the first): in
 * the first. */
void sm__time_note(sm_model *m, uint64_t t_ns)
{
    if (!m->tbin_w)
        m->tbin_w = 1024;
    uint64_t d = t_ns > m->t_first ? t_ns - m->t_first : 0;
    while (d / m->tbin_w >= SM_TBINS) {
        for (int i = 0; i < SM_TBINS / 2; i++)
            m->tbin[i] = m->tbin[2 * i] + m->tbin[2 * i + 1];
        memset(&m->tbin[SM_TBINS / 2], 0, sizeof m->tbin / 2);
        if (m->tbin_w > UINT64_MAX / 2) {
            m->tbin_w = UINT64_MAX;   /* the whole 64-bit range in the first stretches */
            break;
        }
        m->tbin_w *= 2;
    }
    uint64_t b = d / m->tbin_w;
    m->tbin[b < SM_TBINS ? b : SM_TBINS - 1]++;
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x > y ? -1 : x < y;
}

/* The event index when AUTO_EVENTS of the events fall in AUTO_TIME of the
 * time or less (over at least AUTO_MIN_BINS stretches: a short run is
 * drawn on its time), else time. */
#define AUTO_EVENTS 0.80
#define AUTO_TIME 0.20
#define AUTO_MIN_BINS 10
void sm__x_choose(sm_model *m)
{
    if (m->o.x_mode != SM_X_AUTO)
        return;
    m->o.x_mode = SM_X_TIME;
    m->x_auto = 1;
    if (!m->tbin_w || m->events < 100)
        return;
    size_t nb = 0;
    for (size_t i = 0; i < SM_TBINS; i++)
        if (m->tbin[i])
            nb = i + 1;
    if (nb < AUTO_MIN_BINS)
        return;
    uint64_t sorted[SM_TBINS], total = 0;
    memcpy(sorted, m->tbin, nb * sizeof *sorted);
    for (size_t i = 0; i < nb; i++)
        total += sorted[i];
    qsort(sorted, nb, sizeof *sorted, cmp_desc);
    uint64_t sum = 0;
    size_t k = 0;
    while (k < nb && (double)sum < AUTO_EVENTS * (double)total)
        sum += sorted[k++];
    m->x_auto_ev = total ? (double)sum / (double)total : 0;
    m->x_auto_time = (double)k / (double)nb;
    /* where those stretches lie: the first and the last of them */
    uint64_t cut = k ? sorted[k - 1] : 0;
    size_t lo = nb, hi = 0;
    for (size_t i = 0; i < nb; i++)
        if (m->tbin[i] >= cut && m->tbin[i]) {
            if (lo == nb)
                lo = i;
            hi = i;
        }
    m->x_auto_lo = m->t_first + (uint64_t)lo * m->tbin_w;
    m->x_auto_hi = m->t_first + (uint64_t)(hi + 1) * m->tbin_w;
    if (m->x_auto_time <= AUTO_TIME)
        m->o.x_mode = SM_X_EVENTS;
}

int sm_x_auto(const sm_model *m, double *event_share, double *time_share, uint64_t *t_lo,
              uint64_t *t_hi)
{
    *event_share = m->x_auto_ev;
    *time_share = m->x_auto_time;
    *t_lo = m->x_auto_lo;
    *t_hi = m->x_auto_hi;
    return m->x_auto;
}

void sm_set_x_mode(sm_model *m, int mode)
{
    m->o.x_mode = mode;
}

/* After pass 1: the anchors of the marks axis from the marks seen.  The
 * word is the option's, else the first mark's; a mark whose value is below
 * the previous one is skipped (the axis only moves forward).  When the
 * first mark comes after the first event with a positive value, the first
 * event is value 0 (a counter - hour, step, epoch - starts where the
 * recording starts).  0 ok, -1 out of memory. */
int sm__marks_finish(sm_model *m)
{
    m->nanc = m->nmarks = 0;
    snprintf(m->mark_word, sizeof m->mark_word, "%s", m->o.x_word);
    if (m->o.x_mode != SM_X_MARKS || !m->nmark_raw)
        return 0;
    m->anc_ev = malloc((m->nmark_raw + 1) * sizeof *m->anc_ev);
    m->anc_x = malloc((m->nmark_raw + 1) * sizeof *m->anc_x);
    if (!m->anc_ev || !m->anc_x)
        return -1;
    for (size_t i = 0; i < m->nmark_raw; i++) {
        double v;
        char found[32];
        if (sm_mark_value(sm_str(m, m->mark_str[i]), m->mark_word, &v, found,
                          sizeof found))
            continue;
        if (!m->mark_word[0] && found[0])
            snprintf(m->mark_word, sizeof m->mark_word, "%s", found);
        uint64_t x = mark_x(v);
        if (m->nanc && x < m->anc_x[m->nanc - 1])
            continue;
        if (!m->nanc && m->mark_ev[i] > 1 && x > 0) {
            m->anc_ev[0] = 1;
            m->anc_x[0] = 0;
            m->nanc = 1;
        }
        m->anc_ev[m->nanc] = m->mark_ev[i];
        m->anc_x[m->nanc++] = x;
        m->nmarks++;
    }
    return 0;
}

size_t sm_marks(const sm_model *m, const char **word)
{
    if (word)
        *word = m->mark_word;
    return m->nmarks;
}

/* The value in x units at event idx: linear in the event index between
 * two anchors; before the first, the first's; after the last, on the slope
 * of the last two (the last's value when there is only one). */
uint64_t sm__marks_x_at(const sm_model *m, uint64_t idx, size_t *cur)
{
    size_t n = m->nanc;
    if (!n)
        return 0;
    if (idx <= m->anc_ev[0])
        return m->anc_x[0];
    size_t i = cur ? *cur : 0;
    if (i >= n || m->anc_ev[i] > idx)
        i = 0;
    while (i + 1 < n && m->anc_ev[i + 1] <= idx)
        i++;
    if (cur)
        *cur = i;
    size_t a = i, b = i + 1;
    if (b >= n) {
        if (n < 2)
            return m->anc_x[n - 1];
        a = n - 2;
        b = n - 1;
    }
    uint64_t de = m->anc_ev[b] - m->anc_ev[a];
    if (!de)
        return m->anc_x[i];
    double slope = (double)(m->anc_x[b] - m->anc_x[a]) / (double)de;
    double x = (double)m->anc_x[a] + slope * (double)(idx - m->anc_ev[a]);
    return x >= 1.8e19 ? UINT64_MAX / 2 : (uint64_t)x;
}

uint64_t sm_x_of_event(const sm_model *m, uint64_t idx, uint64_t t_ns)
{
    switch (m->o.x_mode) {
    case SM_X_EVENTS: return idx ? idx - 1 : 0;
    case SM_X_MARKS: return sm__marks_x_at(m, idx, NULL);
    default: return t_ns;
    }
}

void sm_set_x_range(sm_model *m, uint64_t lo, uint64_t hi)
{
    m->x_override = 1;
    m->x_lo = lo;
    m->x_hi = hi > lo ? hi : lo < UINT64_MAX ? lo + 1 : lo;
}

void sm_x_range(const sm_model *m, uint64_t *lo, uint64_t *hi)
{
    *lo = 0;
    if (m->x_override) {
        *lo = m->x_lo;
        *hi = m->x_hi;
        return;
    }
    if (m->o.x_mode == SM_X_MARKS) {
        *lo = sm__marks_x_at(m, 1, NULL);
        *hi = sm__marks_x_at(m, m->events ? m->events : 1, NULL);
        if (*hi <= *lo)
            *hi = *lo + 1;
        return;
    }
    if (m->o.x_mode == SM_X_EVENTS) {
        *hi = m->events > 1 ? m->events - 1 : 1;
        return;
    }
    *hi = m->t_max ? m->t_max : 1;
    if (m->o.x_from == SM_FROM_FIRST) {
        uint64_t first = UINT64_MAX;
        if (m->have_first)
            first = m->t_first;
        if (m->have_first_cnt && m->t_first_cnt < first)
            first = m->t_first_cnt;
        if (first != UINT64_MAX && first < *hi)
            *lo = first;
    }
}

int sm_col_of(const sm_model *m, uint64_t x)
{
    uint64_t lo, hi;
    int n = m->o.columns;
    if (n <= 0)
        return 0;
    sm_x_range(m, &lo, &hi);
    if (x <= lo)
        return 0;
    if (x >= hi)
        return n - 1;
    /* the span in 128 bits: hi - lo + 1 wraps to 0 for [0, 2^64-1] (an event
     * at t = 0xffffffffffffffff divided by zero: SIGFPE) */
    unsigned __int128 v = (unsigned __int128)(x - lo) * (unsigned)n;
    uint64_t c = (uint64_t)(v / ((unsigned __int128)(hi - lo) + 1));
    return c >= (uint64_t)n ? n - 1 : (int)c;
}
