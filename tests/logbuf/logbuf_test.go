package logbuf

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBufferRecords(t *testing.T) {
	var b Buffer
	log := b.Logger()
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() { log.Debug("m", "i", i) })
	}
	wg.Wait()
	recs := b.Records(t)
	assert.Len(t, recs, 10, "concurrent writers: every record whole")
	for _, r := range recs {
		assert.Equal(t, "DEBUG", r["level"])
		assert.NotContains(t, r, "time")
	}
	assert.Contains(t, b.String(), `"msg":"m"`)
}
