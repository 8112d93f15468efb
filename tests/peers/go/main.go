// A franz-go (kgo) group member for coopconsumer's interop tests (issue 32).
//
// A test fixture, not product: it drives kgo as a real application does and reports what
// the client did, one JSON object per line on stdout; no logic of coopconsumer lives here.
// Built by tests/peers/_build.py with `go build` (module pinned in go.mod / go.sum).
//
//	peer --bootstrap H:P --group G --topics a,b [--name N] [--balancer cooperative-sticky|sticky|range]
//	     [--session-ms 6000] [--heartbeat-ms 500] [--instance-id ID]
//
// Same contract as tests/peers/java/PeerMember.java: every assigned / revoked / lost
// callback is printed and waits for "ack <seq>" on stdin before it returns; records are
// printed, then their offsets committed (a blocking commit); OnPartitionsRevoked commits
// the revoked partitions' processed offsets first. BlockRebalanceOnPoll keeps callbacks
// between polls, as an application that processes a batch before rebalancing does.
// Commands on stdin: pause, resume, leave (commit, leave the group, exit 0), exit (crash).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	outMu   sync.Mutex
	seq     int64
	acksMu  sync.Mutex
	acks    = map[int64]chan struct{}{}
	paused  atomic.Bool
	leaving atomic.Bool
	// pending: next offset to commit per partition, processed but not committed.
	pendingMu sync.Mutex
	pending   = map[string]map[int32]kgo.EpochOffset{}
)

func emit(event string, fields map[string]any) {
	if fields == nil {
		fields = map[string]any{}
	}
	fields["event"] = event
	line, err := json.Marshal(fields)
	if err != nil {
		line = []byte(fmt.Sprintf(`{"event":"error","message":%q}`, err.Error()))
	}
	outMu.Lock()
	os.Stdout.Write(append(line, '\n'))
	outMu.Unlock()
}

func partitionList(m map[string][]int32) [][2]any {
	out := [][2]any{}
	for topic, ps := range m {
		for _, p := range ps {
			out = append(out, [2]any{topic, p})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][0].(string) != out[j][0].(string) {
			return out[i][0].(string) < out[j][0].(string)
		}
		return out[i][1].(int32) < out[j][1].(int32)
	})
	return out
}

// emitAndWait prints a listener call and waits until the test acknowledges it.
func emitAndWait(event string, m map[string][]int32) {
	ch := make(chan struct{})
	acksMu.Lock()
	seq++
	mine := seq
	acks[mine] = ch
	acksMu.Unlock()
	emit(event, map[string]any{"seq": mine, "partitions": partitionList(m)})
	select {
	case <-ch:
	case <-time.After(60 * time.Second):
		emit("error", map[string]any{"message": fmt.Sprintf("no ack for %s %d", event, mine)})
	}
	acksMu.Lock()
	delete(acks, mine)
	acksMu.Unlock()
}

func takePending(only map[string][]int32) map[string]map[int32]kgo.EpochOffset {
	pendingMu.Lock()
	defer pendingMu.Unlock()
	taken := map[string]map[int32]kgo.EpochOffset{}
	if only == nil {
		taken, pending = pending, map[string]map[int32]kgo.EpochOffset{}
		return taken
	}
	for topic, ps := range only {
		for _, p := range ps {
			if o, ok := pending[topic][p]; ok {
				if taken[topic] == nil {
					taken[topic] = map[int32]kgo.EpochOffset{}
				}
				taken[topic][p] = o
				delete(pending[topic], p)
			}
		}
	}
	return taken
}

func restorePending(offsets map[string]map[int32]kgo.EpochOffset) {
	pendingMu.Lock()
	defer pendingMu.Unlock()
	for topic, ps := range offsets {
		for p, o := range ps {
			if pending[topic] == nil {
				pending[topic] = map[int32]kgo.EpochOffset{}
			}
			if _, ok := pending[topic][p]; !ok {
				pending[topic][p] = o
			}
		}
	}
}

// commit commits offsets synchronously, printing "committed" with the partitions the
// broker accepted and "commit_failed" with the others; returns the retriable failures.
func commit(ctx context.Context, cl *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset, why string) map[string]map[int32]kgo.EpochOffset {
	if len(offsets) == 0 {
		return nil
	}
	done := make(chan struct{})
	retry := map[string]map[int32]kgo.EpochOffset{}
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		defer close(done)
		if err != nil {
			emit("commit_failed", map[string]any{"why": why, "retriable": false, "message": err.Error()})
			return
		}
		ok := [][3]any{}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 {
					ok = append(ok, [3]any{t.Topic, p.Partition, offsets[t.Topic][p.Partition].Offset})
					continue
				}
				e := kerr.ErrorForCode(p.ErrorCode)
				retriable := e == kerr.RebalanceInProgress
				if retriable {
					if retry[t.Topic] == nil {
						retry[t.Topic] = map[int32]kgo.EpochOffset{}
					}
					retry[t.Topic][p.Partition] = offsets[t.Topic][p.Partition]
				}
				emit("commit_failed", map[string]any{"why": why, "retriable": retriable, "message": e.Error(),
					"partition": [2]any{t.Topic, p.Partition}})
			}
		}
		if len(ok) > 0 {
			emit("committed", map[string]any{"why": why, "offsets": ok})
		}
	})
	<-done
	return retry
}

// leading wraps a balancer to report each leader turn: the balancer's MemberBalancer
// runs only on the member the coordinator elected leader.
type leading struct{ kgo.GroupBalancer }

func (l leading) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	ids := []string{}
	for _, m := range members {
		ids = append(ids, m.MemberID)
	}
	emit("led", map[string]any{"members": ids})
	return l.GroupBalancer.MemberBalancer(members)
}

func main() {
	bootstrap := flag.String("bootstrap", "", "bootstrap servers")
	group := flag.String("group", "", "group id")
	topics := flag.String("topics", "", "comma-separated topics")
	name := flag.String("name", "go-peer", "client id")
	balancer := flag.String("balancer", "cooperative-sticky", "cooperative-sticky, sticky or range")
	sessionMs := flag.Int("session-ms", 6000, "session.timeout.ms")
	heartbeatMs := flag.Int("heartbeat-ms", 500, "heartbeat.interval.ms")
	instanceID := flag.String("instance-id", "", "group.instance.id")
	flag.Parse()

	var cl *kgo.Client
	ctx := context.Background()
	var bal kgo.GroupBalancer
	switch *balancer {
	case "cooperative-sticky":
		bal = kgo.CooperativeStickyBalancer()
	case "sticky":
		bal = kgo.StickyBalancer()
	case "range":
		bal = kgo.RangeBalancer()
	default:
		emit("error", map[string]any{"message": "unknown balancer " + *balancer})
		os.Exit(2)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*bootstrap, ",")...),
		kgo.ClientID(*name),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(strings.Split(*topics, ",")...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(leading{bal}),
		kgo.SessionTimeout(time.Duration(*sessionMs) * time.Millisecond),
		kgo.HeartbeatInterval(time.Duration(*heartbeatMs) * time.Millisecond),
		kgo.DisableAutoCommit(),
		// The client's own account of the group (joins, heartbeat errors, losses) on
		// stderr, where the test keeps the tail for its failure reports.
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, c *kgo.Client, m map[string][]int32) {
			member, generation := c.GroupMetadata()
			emit("group", map[string]any{"member_id": member, "generation": generation})
			emitAndWait("assigned", m)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, c *kgo.Client, m map[string][]int32) {
			commit(ctx, c, takePending(m), "revoke")
			emitAndWait("revoked", m)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			takePending(m)
			emitAndWait("lost", m)
		}),
	}
	if *instanceID != "" {
		opts = append(opts, kgo.InstanceID(*instanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		emit("error", map[string]any{"message": err.Error()})
		os.Exit(2)
	}

	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			line := strings.TrimSpace(in.Text())
			switch {
			case strings.HasPrefix(line, "ack "):
				n, _ := strconv.ParseInt(line[4:], 10, 64)
				acksMu.Lock()
				if ch, ok := acks[n]; ok {
					close(ch)
					delete(acks, n)
				}
				acksMu.Unlock()
			case line == "pause":
				paused.Store(true)
			case line == "resume":
				paused.Store(false)
			case line == "leave":
				leaving.Store(true)
				paused.Store(false)
			case line == "exit":
				os.Exit(0)
			}
		}
		// stdin closed: the test is gone.
		os.Exit(3)
	}()
	emit("started", nil)

	reportedPause := false
	for !leaving.Load() {
		if paused.Load() {
			if !reportedPause {
				emit("paused", nil)
			}
			reportedPause = true
			time.Sleep(20 * time.Millisecond)
			continue
		}
		reportedPause = false
		pollCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fetches := cl.PollRecords(pollCtx, 500)
		cancel()
		fetches.EachError(func(topic string, partition int32, err error) {
			if err != context.DeadlineExceeded && err != context.Canceled {
				emit("fetch_error", map[string]any{"topic": topic, "partition": partition, "message": err.Error()})
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			emit("record", map[string]any{"topic": r.Topic, "partition": r.Partition, "offset": r.Offset, "key": string(r.Key)})
			pendingMu.Lock()
			if pending[r.Topic] == nil {
				pending[r.Topic] = map[int32]kgo.EpochOffset{}
			}
			pending[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
			pendingMu.Unlock()
		})
		if retry := commit(ctx, cl, takePending(nil), "poll"); len(retry) > 0 {
			restorePending(retry)
		}
		cl.AllowRebalance()
	}
	// Revoke (committing in the callback) and leave the group.
	cl.CloseAllowingRebalance()
	emit("closed", nil)
	os.Exit(0)
}
