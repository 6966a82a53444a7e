package plan

import (
	"math"
	"strconv"
)

// Cost is a total over rule instances, compared lexicographically: any
// broken hard rule outweighs every soft cost (Mirador: an infinite cost is
// never accepted in exchange for soft gains).
//
// Hard is not a count of infinities, because a count would give the solver
// no gradient: a device 30 % over its capacity needs several moves before it
// is fixed, and each must be seen as progress. A broken hard instance adds
// 1 + its excess (HardRule.Excess, e.g. the overfilled fraction), so fixing
// an instance always beats shrinking another one's excess, and shrinking an
// excess is still an improvement.
type Cost struct {
	Hard float64
	Soft float64
}

// costEpsilon absorbs floating-point noise in cost differences: a delta
// smaller than this is no change. Costs are normalised (fractions of a
// device's mean load, of capacity, replica counts), so 1e-9 is far below any
// real improvement (one byte on a 1 TB device is 1e-12 of its capacity and
// no rule charges single bytes).
const costEpsilon = 1e-9

// Less reports whether c is cheaper than o beyond floating-point noise.
func (c Cost) Less(o Cost) bool {
	if d := c.Hard - o.Hard; d < -costEpsilon {
		return true
	} else if d > costEpsilon {
		return false
	}
	return c.Soft-o.Soft < -costEpsilon
}

// IsZero reports whether nothing is broken and no soft cost remains.
func (c Cost) IsZero() bool { return c.Hard == 0 && c.Soft == 0 }

// Add returns c + o.
func (c Cost) Add(o Cost) Cost { return Cost{c.Hard + o.Hard, c.Soft + o.Soft} }

// Sub returns c − o.
func (c Cost) Sub(o Cost) Cost { return Cost{c.Hard - o.Hard, c.Soft - o.Soft} }

// String prints "0", "1.25" or "hard 2 + 1.25".
func (c Cost) String() string {
	s := fmtFloat(c.Soft)
	if c.Hard != 0 {
		return "hard " + fmtFloat(c.Hard) + " + " + s
	}
	return s
}

// fmtFloat prints 4 significant digits and snaps noise to 0.
func fmtFloat(x float64) string {
	if math.Abs(x) < costEpsilon {
		return "0"
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

// instanceCost turns a rule's return value into a Cost. +Inf is a broken
// hard rule with the given excess; NaN and −Inf are rule bugs and count as
// broken hard rules so they are noticed rather than silently rewarded.
func instanceCost(v, excess float64) Cost {
	switch {
	case math.IsInf(v, 1) || math.IsNaN(v) || math.IsInf(v, -1):
		if excess < 0 || math.IsNaN(excess) || math.IsInf(excess, 0) {
			excess = 0
		}
		return Cost{Hard: 1 + excess}
	default:
		return Cost{Soft: v}
	}
}
