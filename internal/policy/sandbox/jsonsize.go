package sandbox

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// ErrJSONTooLarge is returned by JSONSize when the text would pass the
// limit.
var ErrJSONTooLarge = errors.New("JSON text too large")

// JSONSize returns the length json.Marshal(x) would produce — an upper
// bound, exact but for a few rare escapes — without building the text,
// for the values policy results convert to: nil, bool, float64, string,
// []any and map[string]any. It stops as soon as the size passes limit
// (an error wrapping ErrJSONTooLarge), so it costs at most about limit
// bytes scanned plus one step per value, however many times the value
// holds the same large string: a table of 100 000 references to one
// 8 MiB string is measured in microseconds, where marshalling it would
// ask for 800 GB. Other types are an error.
func JSONSize(x any, limit int) (int, error) {
	js := jsonSizer{limit: limit}
	if err := js.value(x); err != nil {
		return 0, err
	}
	return js.n, nil
}

type jsonSizer struct {
	n, limit int
}

func (js *jsonSizer) add(k int) error {
	js.n += k
	if js.n > js.limit {
		return fmt.Errorf("%w: more than %d bytes", ErrJSONTooLarge, js.limit)
	}
	return nil
}

func (js *jsonSizer) value(x any) error {
	switch v := x.(type) {
	case nil:
		return js.add(4)
	case bool:
		if v {
			return js.add(4)
		}
		return js.add(5)
	case float64:
		return js.add(jsonNumberLen(v))
	case string:
		return js.string(v)
	case []any:
		if err := js.add(2 + max(len(v)-1, 0)); err != nil {
			return err
		}
		for _, e := range v {
			if err := js.value(e); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		// Braces, commas and a colon per key.
		if err := js.add(2 + max(len(v)-1, 0) + len(v)); err != nil {
			return err
		}
		for k, e := range v {
			if err := js.string(k); err != nil {
				return err
			}
			if err := js.value(e); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("a %T cannot be encoded as JSON", x)
}

// string adds a quoted string with encoding/json's escaping (HTML
// characters, control characters, invalid UTF-8 and U+2028/U+2029 take
// six bytes). A string whose raw bytes alone pass the limit fails without
// being scanned.
func (js *jsonSizer) string(s string) error {
	if err := js.add(2 + len(s)); err != nil {
		return err
	}
	extra := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
				extra++
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				extra += 5
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			extra += 6 - size
		}
		i += size
	}
	return js.add(extra)
}

// jsonNumberLen is the length of encoding/json's text for f (its float
// encoder: shortest form, exponent form outside [1e-6, 1e21), "e-07"
// shortened to "e-7"). NaN and infinities, which json.Marshal refuses,
// count as their names.
func jsonNumberLen(f float64) int {
	var buf [32]byte
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(buf[:0], f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		return n - 1
	}
	return len(b)
}
