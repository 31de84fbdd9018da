package main

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// terminalText is s, text that came from a server (a problem's title,
// detail, locations, messages and values, an answer's status line or
// body), as the CLI prints it to a terminal: every character that is not
// printable (strconv.IsPrint: control characters such as ESC, which
// starts ANSI escape sequences, CR, BEL, DEL and the C1 controls U+0080–
// U+009F; format characters such as the bidi controls U+202A–U+202E and
// U+2066–U+2069, U+200B, U+FEFF; line and paragraph separators; spaces
// other than U+0020) is written escaped as strconv.Quote writes it (\x1b,
// \r, \u202e), and so is each byte that is not UTF-8 (\xff). Printable
// text, letters of any script included, is unchanged. With lines, "\n"
// and "\t" are kept (a plain-text answer's lines); without, they are
// escaped too, so that s stays on one line.
func terminalText(s string, lines bool) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case lines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == utf8.RuneError && n == 1, !strconv.IsPrint(r):
			q := strconv.Quote(s[i : i+n])
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
