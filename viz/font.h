/* The renderer's bitmap font: printable ASCII (32..126), hand-drawn 5 x 9
 * glyphs (7 rows cap height + 2 descender rows) in a 6 x 10 cell.
 * canvas_text draws with it at any integer scale. */
#ifndef MEMSNAP_VIZ_FONT_H
#define MEMSNAP_VIZ_FONT_H

#define FONT_GLYPH_W 5
#define FONT_GLYPH_H 9
#define FONT_CELL_W 6   /* advance per character at scale 1 */
#define FONT_CELL_H 10  /* line height at scale 1 */
#define FONT_CAP_H 7    /* rows above the baseline */

/* FONT_GLYPH_H bit rows of character c (bit 4 = leftmost column); a
 * character outside 32..126 gets the glyph of '?'.  Never NULL. */
const unsigned char *font_glyph(int c);

/* 1 when the font has hand-drawn art for c (every printable ASCII does). */
int font_has_glyph(int c);

#endif
