package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
)

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of xs; 0
// when xs is empty.
func percentile[T int | int64 | time.Duration | float64](xs []T, p float64) T {
	if len(xs) == 0 {
		return 0
	}
	s := append([]T(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

func median[T int | int64 | time.Duration | float64](xs []T) T { return percentile(xs, 50) }

func maxOf[T int | int64 | time.Duration | float64](xs []T) T { return percentile(xs, 100) }

// secs renders a duration in seconds with millisecond precision.
func secs(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

// millis renders a duration in milliseconds.
func millis(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

// mb renders bytes in MB (10^6).
func mb(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }

func itoa(i int) string { return strconv.Itoa(i) }

// ratio renders a/b as "4.2×".
func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f×", a/b)
}
