package upgrade

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// The in-memory fakes of the ports: a target holding one object, a cluster
// whose Leases live in a map several runners share, a chart source, a
// journal and hooks. Each keeps what was done to it for the tests to
// assert on. They are safe for concurrent use.

// fakeKind is the kind of the fake target.
const fakeKind = "fake"

// fakeObj is the one object a fakeTarget holds.
type fakeObj struct {
	Chart      string
	Version    string
	Values     map[string]any
	Paused     bool
	PausedByUs bool
	Record     Record
	UID        string
}

// fakeTarget is a Target in memory. Its object has a revision, bumped by
// every change; Apply with an Observed read at another revision fails with
// ErrConflict. It is ready for a want when the object carries it
// (JudgeTarget), no rollout stage is left and notReady is false.
type fakeTarget struct {
	ref Ref

	mu      sync.Mutex
	exists  bool
	obj     fakeObj
	rev     int
	backups map[string]*Backup // by the version backed up
	order   []string           // versions backed up, oldest first

	// health is what Health reports.
	health Health
	// notReady holds the rollout back: not ready while true.
	notReady bool
	// rollout are not-ready judgements a watch goes through, one per
	// judgement; each is followed by a change signal.
	rollout []string
	// errs injects an error into a method, by its name.
	errs map[string]error

	// hooks into the methods, called without the lock held: a test acts
	// there as another process would.
	onHealth func()
	onApply  func(attempt int) // before the revision check
	onBackup func()
	onWatch  func()

	// what was done to it
	writes      []Change // the successful Applys
	applyCalls  int
	backupCalls int
	backupsMade int
	healthCalls int
	watchCalls  int
	asked       []Want // what the watches' Readiness was asked for
	subs        map[chan struct{}]bool
}

func newFakeTarget(name string, o fakeObj) *fakeTarget {
	if o.UID == "" {
		o.UID = "uid-" + name
	}
	return &fakeTarget{ref: Ref{Kind: fakeKind, Namespace: "ns", Name: name}, exists: true, obj: o,
		backups: map[string]*Backup{}, errs: map[string]error{}, subs: map[chan struct{}]bool{}}
}

var _ Target = (*fakeTarget)(nil)

func (f *fakeTarget) Ref() Ref { return f.ref }

func (f *fakeTarget) err(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.errs[method]
}

// setErr injects err into method (nil: none).
func (f *fakeTarget) setErr(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[method] = err
}

// observedLocked is the object as a read shows it; nil when absent.
func (f *fakeTarget) observedLocked() *Observed {
	if !f.exists {
		return nil
	}
	v := deepCopy(f.obj.Values)
	h, err := values.Hash(v)
	if err != nil {
		panic(err)
	}
	return &Observed{Chart: f.obj.Chart, Version: f.obj.Version, Values: v, ValuesHash: h,
		Paused: f.obj.Paused, PausedByUs: f.obj.PausedByUs, Applied: f.obj.Record, UID: f.obj.UID, Source: f.rev}
}

func (f *fakeTarget) Read(context.Context) (*Observed, error) {
	if err := f.err("Read"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.observedLocked(), nil
}

func (f *fakeTarget) Health(context.Context, *Observed) (Health, error) {
	f.mu.Lock()
	f.healthCalls++
	hook := f.onHealth
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	if err := f.err("Health"); err != nil {
		return Health{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return Health{Problems: slices.Clone(f.health.Problems), Drift: slices.Clone(f.health.Drift)}, nil
}

func (f *fakeTarget) Apply(_ context.Context, o *Observed, c Change) (*Observed, error) {
	f.mu.Lock()
	f.applyCalls++
	attempt, hook := f.applyCalls, f.onApply
	f.mu.Unlock()
	if hook != nil {
		hook(attempt)
	}
	if err := f.err("Apply"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.exists {
		return nil, errors.New("the fake target does not exist")
	}
	if rev, _ := o.Source.(int); rev != f.rev {
		return nil, fmt.Errorf("%w: read at revision %d, now %d", ErrConflict, rev, f.rev)
	}
	if c.Restore != nil {
		b := c.Restore.Data.(fakeObj)
		f.obj.Version, f.obj.Values = b.Version, deepCopy(b.Values)
	} else {
		f.obj.Version, f.obj.Values = c.Version, deepCopy(c.Values)
	}
	f.obj.Paused, f.obj.PausedByUs, f.obj.Record = false, false, c.Record
	c.Values = deepCopy(c.Values)
	f.writes = append(f.writes, c)
	f.changedLocked()
	return f.observedLocked(), nil
}

func (f *fakeTarget) Backup(_ context.Context, o *Observed) (string, bool, error) {
	f.mu.Lock()
	f.backupCalls++
	hook := f.onBackup
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	if err := f.err("Backup"); err != nil {
		return "", false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	name := "backup-" + f.ref.Name + "-" + o.Version
	if _, ok := f.backups[o.Version]; ok {
		return name, false, nil
	}
	f.backups[o.Version] = &Backup{Name: name, Version: o.Version, ValuesHash: o.ValuesHash,
		Data: fakeObj{Chart: o.Chart, Version: o.Version, Values: deepCopy(o.Values)}}
	f.order = append(f.order, o.Version)
	f.backupsMade++
	return name, true, nil
}

func (f *fakeTarget) ReadBackup(_ context.Context, fromVersion string) (*Backup, error) {
	if err := f.err("ReadBackup"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fromVersion == "" {
		if len(f.order) == 0 {
			return nil, fmt.Errorf("no backup of %s", f.ref)
		}
		fromVersion = f.order[len(f.order)-1]
	}
	b, ok := f.backups[fromVersion]
	if !ok {
		return nil, fmt.Errorf("no backup of %s taken at version %s", f.ref, fromVersion)
	}
	cp := *b
	return &cp, nil
}

func (f *fakeTarget) Backups(context.Context) ([]string, error) {
	if err := f.err("Backups"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, v := range f.order {
		out = append(out, f.backups[v].Name)
	}
	return out, nil
}

func (f *fakeTarget) Look(_ context.Context, _ *Observed, want Want) (Readiness, error) {
	if err := f.err("Look"); err != nil {
		return Readiness{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.judgeLocked(want, false), nil
}

// judgeLocked judges readiness for want; consume takes the first rollout
// stage (a watch moving on).
func (f *fakeTarget) judgeLocked(want Want, consume bool) Readiness {
	r := Readiness{DesiredCount: 1}
	if JudgeTarget(&r, fakeKind, f.observedLocked(), want) {
		switch {
		case len(f.rollout) > 0:
			r.Wait("%s", f.rollout[0])
			r.NonReady = []string{"deployment/app", "deployment/worker"}
			if consume {
				f.rollout = f.rollout[1:]
				f.changedLocked()
			}
		case f.notReady:
			r.Wait("the rollout is not done")
		}
	}
	if len(r.Waiting) == 0 {
		r.Ready, r.ReadyCount = true, 1
	}
	return r
}

func (f *fakeTarget) Watch(ctx context.Context) (Watch, error) {
	f.mu.Lock()
	f.watchCalls++
	hook := f.onWatch
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	if err := f.err("Watch"); err != nil {
		return nil, err
	}
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	f.subs[ch] = true
	f.mu.Unlock()
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		delete(f.subs, ch)
		f.mu.Unlock()
	}()
	return &fakeWatch{f: f, ch: ch}, nil
}

// changedLocked signals every watch.
func (f *fakeTarget) changedLocked() {
	for ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// update changes the object as another process would: a new revision, a
// signal to the watches, no write of ours.
func (f *fakeTarget) update(change func(o *fakeObj)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(&f.obj)
	f.rev++
	f.changedLocked()
}

// applyAs is another process's apply of version with user values v.
func (f *fakeTarget) applyAs(t testing.TB, version string, v map[string]any) {
	t.Helper()
	h, err := values.Hash(v)
	require.NoError(t, err)
	f.update(func(o *fakeObj) {
		prev := o.Version
		o.Version, o.Values, o.Paused, o.PausedByUs = version, deepCopy(v), false, false
		o.Record = Record{Version: version, ValuesHash: h, AppliedAt: "2024-01-01T00:00:00Z", PreviousVersion: prev}
	})
}

// setReady flips the rollout: ready (with the record matching) or not.
func (f *fakeTarget) setReady(ready bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notReady = !ready
	f.changedLocked()
}

func (f *fakeTarget) current() fakeObj {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.obj
	o.Values = deepCopy(o.Values)
	return o
}

func (f *fakeTarget) writeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.writes)
}

// readyNow judges the target now for the want its record names.
func (f *fakeTarget) readyNow() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.obj.Record.Want()
	return ok && f.judgeLocked(w, false).Ready
}

// fakeWatch is a watch of a fakeTarget.
type fakeWatch struct {
	f  *fakeTarget
	ch chan struct{}
}

func (w *fakeWatch) Current() *Observed {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	return w.f.observedLocked()
}

func (w *fakeWatch) Readiness(want Want) Readiness {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	w.f.asked = append(w.f.asked, want)
	return w.f.judgeLocked(want, true)
}

func (w *fakeWatch) Changed() <-chan struct{} { return w.ch }

// leaseStore holds the Leases of a fake cluster, shared by every process
// (runner) of a test, with the semantics of cluster.Lease: a Lease is free,
// held by someone (until it expires, unless renewed), or ours. history
// records takes, releases and Events in order.
type leaseStore struct {
	mu      sync.Mutex
	leases  map[string]*leaseState
	history []string
}

type leaseState struct {
	holder      string
	renewed     time.Time
	duration    time.Duration
	renewing    bool          // a Hold renews it: it does not expire
	lost        chan struct{} // the holder's Hold, closed when another takes it
	annotations map[string]string
	transitions int
}

func newLeaseStore() *leaseStore { return &leaseStore{leases: map[string]*leaseState{}} }

func (s *leaseStore) log(format string, args ...any) {
	s.history = append(s.history, fmt.Sprintf(format, args...))
}

// seed puts a Lease in place: held by holder, last renewed at renewed.
func (s *leaseStore) seed(key, holder string, renewed time.Time, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases[key] = &leaseState{holder: holder, renewed: renewed, duration: d}
}

// steal hands the Lease to thief at once, as a takeover after the holder
// missed its renewals would.
func (s *leaseStore) steal(key, thief string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.leases[key]
	if st == nil {
		st = &leaseState{}
		s.leases[key] = st
	}
	s.takeLocked(st, key, thief, time.Hour, nil)
}

func (s *leaseStore) takeLocked(st *leaseState, key, who string, d time.Duration, ann map[string]string) {
	if st.holder != who {
		if st.lost != nil {
			close(st.lost)
			st.lost = nil
		}
		st.renewing = false
		st.transitions++
		st.annotations = maps.Clone(ann)
		s.log("take %s %s", key, who)
	}
	st.holder, st.renewed, st.duration = who, time.Now(), d
}

func (s *leaseStore) holder(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.leases[key]; st != nil {
		return st.holder
	}
	return ""
}

func (s *leaseStore) historyCopy() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.history)
}

// fakeLease is one process's handle on a Lease of the store.
type fakeLease struct {
	c        *fakeCluster
	key      string
	identity string
	duration time.Duration
	ann      map[string]string
}

func (l *fakeLease) TryAcquire(context.Context) (bool, string, error) {
	if err := l.c.err("TryAcquire"); err != nil {
		return false, "", err
	}
	s := l.c.leases
	s.mu.Lock()
	defer s.mu.Unlock()
	l.c.mu.Lock()
	l.c.tries++
	l.c.mu.Unlock()
	st := s.leases[l.key]
	if st == nil {
		st = &leaseState{}
		s.leases[l.key] = st
	}
	expired := !st.renewing && time.Now().After(st.renewed.Add(st.duration))
	if st.holder != "" && st.holder != l.identity && !expired {
		return false, st.holder, nil
	}
	s.takeLocked(st, l.key, l.identity, l.duration, l.ann)
	return true, l.identity, nil
}

func (l *fakeLease) Hold(context.Context) (func(), <-chan struct{}) {
	s := l.c.leases
	s.mu.Lock()
	defer s.mu.Unlock()
	lost := make(chan struct{})
	st := s.leases[l.key]
	if st == nil || st.holder != l.identity {
		close(lost)
		return func() {}, lost
	}
	st.renewing, st.lost = true, lost
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if st.holder == l.identity && st.lost == lost {
			st.renewing, st.lost, st.renewed = false, nil, time.Now()
		}
	}, lost
}

func (l *fakeLease) Release(context.Context) error {
	if err := l.c.err("Release"); err != nil {
		return err
	}
	s := l.c.leases
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.leases[l.key]
	if st == nil || st.holder != l.identity {
		return nil
	}
	st.holder, st.renewing, st.lost = "", false, nil
	s.log("release %s %s", l.key, l.identity)
	return nil
}

// fakeCluster is the Cluster port of one process (identity) in a cluster
// whose Leases are in a shared store.
type fakeCluster struct {
	identity string
	duration time.Duration
	leases   *leaseStore

	mu       sync.Mutex
	live     values.LiveObjects
	notReady []string
	errs     map[string]error
	events   []Event
	liveRefs [][]values.ObjectRef
	tries    int
}

func newFakeCluster(identity string, leases *leaseStore) *fakeCluster {
	return &fakeCluster{identity: identity, duration: time.Minute, leases: leases, errs: map[string]error{}, live: values.LiveObjects{}}
}

var _ Cluster = (*fakeCluster)(nil)

func (c *fakeCluster) err(method string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errs[method]
}

func (c *fakeCluster) setErr(method string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs[method] = err
}

func (c *fakeCluster) Live(_ context.Context, refs []values.ObjectRef) (values.LiveObjects, error) {
	if err := c.err("Live"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.liveRefs = append(c.liveRefs, refs)
	out := values.LiveObjects{}
	for _, r := range refs {
		if o, ok := c.live[r]; ok {
			out[r] = deepCopy(o)
		}
	}
	return out, nil
}

func (c *fakeCluster) NotReadyNodes(context.Context) ([]string, error) {
	if err := c.err("NotReadyNodes"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.notReady), nil
}

func (c *fakeCluster) Lease(namespace, name string, annotations map[string]string) Lease {
	return &fakeLease{c: c, key: namespace + "/" + name, identity: c.identity, duration: c.duration, ann: maps.Clone(annotations)}
}

func (c *fakeCluster) Event(_ context.Context, e Event) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
	c.leases.mu.Lock()
	c.leases.log("event %s %s", c.identity, e.Reason)
	c.leases.mu.Unlock()
}

func (c *fakeCluster) eventList() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

// fakeSource is a ChartSource of charts by name@version.
type fakeSource struct {
	mu          sync.Mutex
	charts      map[string]*Chart
	versionsErr error
	loads       []string
}

func newFakeSource(charts ...*Chart) *fakeSource {
	s := &fakeSource{charts: map[string]*Chart{}}
	for _, c := range charts {
		s.charts[c.Name+"@"+c.Version] = c
	}
	return s
}

var _ ChartSource = (*fakeSource)(nil)

func (s *fakeSource) Load(_ context.Context, name, version string) (*Chart, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads = append(s.loads, name+"@"+version)
	c, ok := s.charts[name+"@"+version]
	if !ok {
		return nil, fmt.Errorf("chart %s version %s not found", name, version)
	}
	cp := *c
	cp.Defaults = deepCopy(c.Defaults)
	if cp.Check == nil {
		cp.Check = func(map[string]any) error { return nil }
	}
	return &cp, nil
}

func (s *fakeSource) Versions(_ context.Context, name string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.versionsErr != nil {
		return nil, s.versionsErr
	}
	var out []string
	for _, c := range s.charts {
		if c.Name == name {
			out = append(out, c.Version)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (s *fakeSource) String() string { return "fake-repo" }

// fakeJournal is a Journal in a map. crashAfter, when set, makes the Save
// that first records that step store the entry and then fail with
// errCrash, as if the process was killed right after.
type fakeJournal struct {
	mu         sync.Mutex
	entries    map[string]Entry
	saves      int
	crashAfter string
	crashed    bool
	loadErr    error
	saveErr    error
}

var errCrash = errors.New("killed")

func newFakeJournal() *fakeJournal { return &fakeJournal{entries: map[string]Entry{}} }

var _ Journal = (*fakeJournal)(nil)

func (j *fakeJournal) Load(target, version string) (Entry, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.loadErr != nil {
		return Entry{}, false, j.loadErr
	}
	e, ok := j.entries[target+"@"+version]
	e.Phases = maps.Clone(e.Phases)
	return e, ok, nil
}

func (j *fakeJournal) Save(e Entry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.saveErr != nil {
		return j.saveErr
	}
	key := e.Target + "@" + e.ToVersion
	_, had := j.entries[key].Phases[j.crashAfter]
	e.Phases = maps.Clone(e.Phases)
	j.entries[key] = e
	j.saves++
	if _, has := e.Phases[j.crashAfter]; j.crashAfter != "" && has && !had && !j.crashed {
		j.crashed = true
		return errCrash
	}
	return nil
}

func (j *fakeJournal) entry(target, version string) (Entry, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.entries[target+"@"+version]
	return e, ok
}

// fakeHooks records the hooks run; fail makes one ("pre-preflight") fail.
type fakeHooks struct {
	mu       sync.Mutex
	calls    []string
	contexts []HookContext
	stepErrs []error
	fail     map[string]error
}

var _ Hooks = (*fakeHooks)(nil)

func (h *fakeHooks) Run(_ context.Context, kind, step string, c HookContext, stepErr error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	name := kind + "-" + step
	h.calls = append(h.calls, name)
	h.contexts = append(h.contexts, c)
	h.stepErrs = append(h.stepErrs, stepErr)
	if err := h.fail[name]; err != nil {
		if kind == "pre" {
			return outcome.Refused(fmt.Errorf("hook %s failed: %w", name, err))
		}
		return fmt.Errorf("hook %s failed: %w", name, err)
	}
	return nil
}

func (h *fakeHooks) callList() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// syncBuffer is a bytes.Buffer safe for the goroutines of a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lines returns the log lines that contain every one of words.
func (s *syncBuffer) lines(words ...string) []string {
	var out []string
	for _, l := range strings.Split(s.String(), "\n") {
		ok := l != ""
		for _, w := range words {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

func deepCopy(m map[string]any) map[string]any {
	out, _ := values.DeepCopy(m).(map[string]any)
	return out
}
