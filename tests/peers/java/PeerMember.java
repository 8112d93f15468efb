// A Kafka Java client group member for coopconsumer's interop tests (issue 32).
//
// A test fixture, not product: it only drives org.apache.kafka.clients' KafkaConsumer as a
// real application would and reports what the client did, one JSON object per line on
// stdout. No logic of coopconsumer lives here. Built by tests/peers/_build.py with javac
// against kafka-clients of the test broker's own distribution.
//
//   java PeerMember member --bootstrap H:P --group G (--topics a,b | --pattern RE | --regex RE)
//        [--name N] [--prop key=value ...] [--assignor-name NAME]
//   java PeerMember referee --bootstrap H:P --topics a,b
//   java PeerMember bench --bootstrap H:P --group G --topics a,b [--name N]
//        [--strategy cooperative-sticky] [--prop key=value ...]
//
// member: subscribes with a ConsumerRebalanceListener. Every assigned / revoked / lost call
// is printed and then waits for "ack <seq>" on stdin before returning, so the test's
// ownership ledger sees a revocation before the coordinator can hand the partitions on.
// After each poll it prints the records, then commits their offsets (commitSync); inside
// onPartitionsRevoked it first commits the revoked partitions' processed offsets.
// Commands on stdin: "pause" (stop polling after the current batch; printed as "paused"),
// "resume", "leave" (close(): commit nothing more, leave the group, exit 0), "exit"
// (Runtime.halt without closing: the group sees a crash).
// --assignor-name NAME adds PeerAssignor, a ConsumerPartitionAssignor called NAME that never
// leads and prints the Assignment it decoded (partitions and user data in hex).
//
// bench (benchmarks/rebalance.py): a plain KafkaConsumer as an application runs it, with
// auto-commit on and listeners that return at once. It constructs the consumer, prints
// "ready" and waits for "go" on stdin before it subscribes (so JVM start-up is outside the
// timed window), then prints every listener call and, once per poll that returned records,
// the partitions they came from; each line carries "at", System.nanoTime() (CLOCK_MONOTONIC
// on Linux, the clock of Python's time.monotonic()). "subscribing" and "closing" mark the
// calls that open the benchmark's windows. "leave" closes the consumer (it leaves the
// group) and exits.
//
// referee: a read_committed reader with manual assignment, reading every partition of the
// topics from the beginning to its end offset; prints one summary: records, distinct keys,
// keys seen more than once, and for keys of the form <prefix>-<n> the numbers missing.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class PeerMember {
    private static final Object OUT = new Object();
    private static final Map<Long, CountDownLatch> ACKS = new ConcurrentHashMap<>();
    private static long seq = 0;
    private static final long ACK_TIMEOUT_S = 60;

    private static volatile boolean paused = false;
    private static volatile boolean leaving = false;

    public static void main(String[] args) throws Exception {
        Map<String, List<String>> opts = parse(args);
        String mode = args.length > 0 ? args[0] : "";
        if (mode.equals("referee")) {
            referee(opts);
        } else if (mode.equals("bench")) {
            bench(opts);
        } else if (mode.equals("member")) {
            member(opts);
        } else {
            throw new IllegalArgumentException("first argument: member or referee");
        }
    }

    // --- output -------------------------------------------------------------------

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static String partitions(Collection<TopicPartition> tps) {
        List<String> items = new ArrayList<>();
        List<TopicPartition> sorted = new ArrayList<>(tps == null ? List.<TopicPartition>of() : tps);
        sorted.sort((a, b) -> a.topic().equals(b.topic())
                ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic()));
        for (TopicPartition tp : sorted) {
            items.add("[" + quote(tp.topic()) + "," + tp.partition() + "]");
        }
        return "[" + String.join(",", items) + "]";
    }

    static String offsets(Map<TopicPartition, OffsetAndMetadata> offsets) {
        List<String> items = new ArrayList<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            items.add("[" + quote(e.getKey().topic()) + "," + e.getKey().partition() + ","
                    + e.getValue().offset() + "]");
        }
        return "[" + String.join(",", items) + "]";
    }

    static void emit(String event, String fields) {
        synchronized (OUT) {
            System.out.println("{\"event\":" + quote(event) + (fields.isEmpty() ? "" : "," + fields) + "}");
            System.out.flush();
        }
    }

    /** Prints a listener call and waits for the test to acknowledge it ("ack <seq>"). */
    static void emitAndWait(String event, Collection<TopicPartition> tps) {
        long mine;
        CountDownLatch latch = new CountDownLatch(1);
        synchronized (OUT) {
            mine = ++seq;
            ACKS.put(mine, latch);
        }
        emit(event, "\"seq\":" + mine + ",\"partitions\":" + partitions(tps));
        try {
            if (!latch.await(ACK_TIMEOUT_S, TimeUnit.SECONDS)) {
                emit("error", "\"message\":" + quote("no ack for " + event + " " + mine));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        ACKS.remove(mine);
    }

    // --- member -------------------------------------------------------------------

    public static final class PeerAssignor implements ConsumerPartitionAssignor {
        static String assignorName = "peer";

        @Override
        public GroupAssignment assign(Cluster metadata, GroupSubscription groupSubscription) {
            throw new IllegalStateException("PeerAssignor never leads: a Python member must");
        }

        @Override
        public void onAssignment(Assignment assignment, ConsumerGroupMetadata metadata) {
            StringBuilder hex = new StringBuilder();
            if (assignment.userData() != null) {
                java.nio.ByteBuffer data = assignment.userData().duplicate();
                while (data.hasRemaining()) hex.append(String.format("%02x", data.get()));
            }
            emit("assignor_assignment", "\"generation\":" + metadata.generationId()
                    + ",\"partitions\":" + partitions(assignment.partitions())
                    + ",\"user_data\":" + quote(hex.toString()));
        }

        @Override
        public List<RebalanceProtocol> supportedProtocols() {
            return Arrays.asList(RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE);
        }

        @Override
        public java.nio.ByteBuffer subscriptionUserData(java.util.Set<String> topics) {
            return java.nio.ByteBuffer.wrap(("java-peer:" + clientId).getBytes(StandardCharsets.UTF_8));
        }

        @Override
        public String name() {
            return assignorName;
        }
    }

    // The built-in assignors, reporting each leader turn (assign() runs on the leader only).
    static String led(ConsumerPartitionAssignor.GroupSubscription subscription) {
        List<String> ids = new ArrayList<>();
        for (String id : subscription.groupSubscription().keySet()) ids.add(quote(id));
        return "\"members\":[" + String.join(",", ids) + "]";
    }

    public static final class LeadingCooperativeSticky extends org.apache.kafka.clients.consumer.CooperativeStickyAssignor {
        @Override
        public ConsumerPartitionAssignor.GroupAssignment assign(Cluster metadata, ConsumerPartitionAssignor.GroupSubscription subscription) {
            emit("led", led(subscription));
            return super.assign(metadata, subscription);
        }
    }

    public static final class LeadingSticky extends org.apache.kafka.clients.consumer.StickyAssignor {
        @Override
        public ConsumerPartitionAssignor.GroupAssignment assign(Cluster metadata, ConsumerPartitionAssignor.GroupSubscription subscription) {
            emit("led", led(subscription));
            return super.assign(metadata, subscription);
        }
    }

    public static final class LeadingRange extends org.apache.kafka.clients.consumer.RangeAssignor {
        @Override
        public ConsumerPartitionAssignor.GroupAssignment assign(Cluster metadata, ConsumerPartitionAssignor.GroupSubscription subscription) {
            emit("led", led(subscription));
            return super.assign(metadata, subscription);
        }
    }

    static String clientId = "java-peer";

    static void member(Map<String, List<String>> opts) throws Exception {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, one(opts, "bootstrap"));
        props.put(ConsumerConfig.GROUP_ID_CONFIG, one(opts, "group"));
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        clientId = opts.containsKey("name") ? one(opts, "name") : "java-peer";
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        // --strategy: comma-separated cooperative-sticky, sticky, range (the leader-reporting
        // subclasses of Java's built-ins, same names), in order of preference.
        if (opts.containsKey("strategy")) {
            List<String> classes = new ArrayList<>();
            for (String s : one(opts, "strategy").split(",")) {
                switch (s.trim()) {
                    case "cooperative-sticky": classes.add(LeadingCooperativeSticky.class.getName()); break;
                    case "sticky": classes.add(LeadingSticky.class.getName()); break;
                    case "range": classes.add(LeadingRange.class.getName()); break;
                    default: throw new IllegalArgumentException("unknown strategy " + s);
                }
            }
            props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, String.join(",", classes));
        }
        for (String kv : opts.getOrDefault("prop", List.of())) {
            int eq = kv.indexOf('=');
            props.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        if (opts.containsKey("assignor-name")) {
            PeerAssignor.assignorName = one(opts, "assignor-name");
            props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, PeerAssignor.class.getName());
        }
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();

        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                Map<TopicPartition, OffsetAndMetadata> mine = new HashMap<>();
                for (TopicPartition tp : partitions) {
                    OffsetAndMetadata o = pending.remove(tp);
                    if (o != null) mine.put(tp, o);
                }
                commit(consumer, mine, "revoke");
                emitAndWait("revoked", partitions);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                ConsumerGroupMetadata m = consumer.groupMetadata();
                emit("group", "\"member_id\":" + quote(m.memberId()) + ",\"generation\":" + m.generationId());
                emitAndWait("assigned", partitions);
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                for (TopicPartition tp : partitions) pending.remove(tp);
                emitAndWait("lost", partitions);
            }
        };

        if (opts.containsKey("topics")) {
            consumer.subscribe(Arrays.asList(one(opts, "topics").split(",")), listener);
        } else if (opts.containsKey("pattern")) {
            consumer.subscribe(Pattern.compile(one(opts, "pattern")), listener);
        } else {
            consumer.subscribe(new SubscriptionPattern(one(opts, "regex")), listener);
        }

        Thread stdin = new Thread(() -> readCommands(consumer), "peer-stdin");
        stdin.setDaemon(true);
        stdin.start();
        emit("started", "");

        try {
            boolean reportedPause = false;
            while (!leaving) {
                if (paused) {
                    if (!reportedPause) emit("paused", "");
                    reportedPause = true;
                    Thread.sleep(20);
                    continue;
                }
                reportedPause = false;
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(100));
                } catch (WakeupException e) {
                    continue;
                }
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    String key = r.key() == null ? "" : new String(r.key(), StandardCharsets.UTF_8);
                    emit("record", "\"topic\":" + quote(r.topic()) + ",\"partition\":" + r.partition()
                            + ",\"offset\":" + r.offset() + ",\"key\":" + quote(key));
                    pending.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                if (!pending.isEmpty()) {
                    Map<TopicPartition, OffsetAndMetadata> batch = new HashMap<>(pending);
                    pending.clear();
                    if (!commit(consumer, batch, "poll")) {
                        // Retriable (a rebalance runs): commit again after the next poll,
                        // unless the partitions are gone by then.
                        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : batch.entrySet()) {
                            if (consumer.assignment().contains(e.getKey())) pending.putIfAbsent(e.getKey(), e.getValue());
                        }
                    }
                }
            }
            consumer.close();
            emit("closed", "");
        } catch (Throwable t) {
            emit("error", "\"message\":" + quote(t.toString()));
            System.out.flush();
            Runtime.getRuntime().halt(2);
        }
        Runtime.getRuntime().halt(0);
    }

    /** commitSync; prints "committed" or "commit_failed"; false when worth retrying. */
    static boolean commit(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, OffsetAndMetadata> offsets, String why) {
        if (offsets.isEmpty()) return true;
        try {
            consumer.commitSync(offsets);
            emit("committed", "\"why\":" + quote(why) + ",\"offsets\":" + offsets(offsets));
            return true;
        } catch (org.apache.kafka.common.errors.RebalanceInProgressException e) {
            emit("commit_failed", "\"why\":" + quote(why) + ",\"retriable\":true,\"message\":" + quote(e.toString()));
            return false;
        } catch (org.apache.kafka.common.KafkaException e) {
            emit("commit_failed", "\"why\":" + quote(why) + ",\"retriable\":false,\"message\":" + quote(e.toString()));
            return true;
        }
    }

    static void readCommands(KafkaConsumer<byte[], byte[]> consumer) {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                line = line.trim();
                if (line.startsWith("ack ")) {
                    CountDownLatch latch = ACKS.get(Long.parseLong(line.substring(4)));
                    if (latch != null) latch.countDown();
                } else if (line.equals("pause")) {
                    paused = true;
                } else if (line.equals("resume")) {
                    paused = false;
                } else if (line.equals("leave")) {
                    leaving = true;
                    paused = false;
                } else if (line.equals("exit")) {
                    Runtime.getRuntime().halt(0);
                }
            }
        } catch (Exception e) {
            emit("error", "\"message\":" + quote("stdin: " + e));
        }
        // stdin closed: the test is gone; do not linger in the group.
        Runtime.getRuntime().halt(3);
    }

    // --- bench --------------------------------------------------------------------

    static void emitAt(String event, String fields) {
        emit(event, "\"at\":" + System.nanoTime() + (fields.isEmpty() ? "" : "," + fields));
    }

    static void bench(Map<String, List<String>> opts) throws Exception {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, one(opts, "bootstrap"));
        props.put(ConsumerConfig.GROUP_ID_CONFIG, one(opts, "group"));
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, opts.containsKey("name") ? one(opts, "name") : "java-bench");
        if (opts.containsKey("strategy")) {
            if (!one(opts, "strategy").equals("cooperative-sticky")) {
                throw new IllegalArgumentException("bench: --strategy cooperative-sticky only");
            }
            props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                    org.apache.kafka.clients.consumer.CooperativeStickyAssignor.class.getName());
        }
        for (String kv : opts.getOrDefault("prop", List.of())) {
            int eq = kv.indexOf('=');
            props.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        CountDownLatch go = new CountDownLatch(1);
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    line = line.trim();
                    if (line.equals("go")) {
                        go.countDown();
                    } else if (line.equals("leave")) {
                        leaving = true;
                        go.countDown();
                        consumer.wakeup();
                    } else if (line.equals("exit")) {
                        Runtime.getRuntime().halt(0);
                    }
                }
            } catch (Exception e) {
                emit("error", "\"message\":" + quote("stdin: " + e));
            }
            Runtime.getRuntime().halt(3);
        }, "peer-stdin");
        stdin.setDaemon(true);
        stdin.start();
        emitAt("ready", "");
        go.await();
        try {
            emitAt("subscribing", "");
            consumer.subscribe(Arrays.asList(one(opts, "topics").split(",")), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    emitAt("revoked", "\"partitions\":" + partitions(partitions));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    emitAt("assigned", "\"partitions\":" + partitions(partitions));
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    emitAt("lost", "\"partitions\":" + partitions(partitions));
                }
            });
            emitAt("subscribed", "");
            while (!leaving) {
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(100));
                } catch (WakeupException e) {
                    continue;
                }
                if (!records.isEmpty()) {
                    emitAt("records", "\"partitions\":" + partitions(records.partitions()));
                }
            }
            emitAt("closing", "");
            consumer.close();
            emitAt("closed", "");
        } catch (Throwable t) {
            emit("error", "\"message\":" + quote(t.toString()));
            System.out.flush();
            Runtime.getRuntime().halt(2);
        }
        Runtime.getRuntime().halt(0);
    }

    // --- referee ------------------------------------------------------------------

    static void referee(Map<String, List<String>> opts) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, one(opts, "bootstrap"));
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        Map<String, Integer> seen = new HashMap<>();
        long total = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (String topic : one(opts, "topics").split(",")) {
                consumer.partitionsFor(topic, Duration.ofSeconds(30))
                        .forEach(p -> tps.add(new TopicPartition(topic, p.partition())));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            // read_committed: the end is the last stable offset.
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofSeconds(30));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (System.nanoTime() < deadline) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (consumer.position(tp) < ends.get(tp)) done = false;
                }
                if (done) break;
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    String key = r.key() == null ? "" : new String(r.key(), StandardCharsets.UTF_8);
                    seen.merge(key, 1, Integer::sum);
                    total++;
                }
            }
            long duplicates = 0;
            List<String> dupKeys = new ArrayList<>();
            Map<String, TreeSet<Long>> numbers = new TreeMap<>();
            for (Map.Entry<String, Integer> e : seen.entrySet()) {
                if (e.getValue() > 1) {
                    duplicates += e.getValue() - 1;
                    if (dupKeys.size() < 10) dupKeys.add(quote(e.getKey()));
                }
                // A numbered key: a prefix and a trailing decimal number ("k17", "k-17").
                String key = e.getKey();
                int digits = key.length();
                while (digits > 0 && Character.isDigit(key.charAt(digits - 1))) digits--;
                if (digits < key.length() && key.length() - digits < 18) {
                    long n = Long.parseLong(key.substring(digits));
                    numbers.computeIfAbsent(key.substring(0, digits), k -> new TreeSet<>()).add(n);
                }
            }
            List<String> gaps = new ArrayList<>();
            long gapCount = 0;
            // --count N: every prefix must have exactly the numbers 0..N-1.
            long count = opts.containsKey("count") ? Long.parseLong(one(opts, "count")) : -1;
            for (Map.Entry<String, TreeSet<Long>> e : numbers.entrySet()) {
                long expect = count >= 0 ? 0 : e.getValue().first();
                TreeSet<Long> present = new TreeSet<>(e.getValue());
                if (count >= 0) present.add(count);  // a sentinel: gaps up to the end count
                for (long n : present) {
                    while (expect < n) {
                        gapCount++;
                        if (gaps.size() < 20) gaps.add(quote(e.getKey() + expect));
                        expect++;
                    }
                    expect = n + 1;
                }
            }
            List<String> endItems = new ArrayList<>();
            for (TopicPartition tp : tps) {
                endItems.add("[" + quote(tp.topic()) + "," + tp.partition() + "," + ends.get(tp) + "]");
            }
            emit("referee", "\"records\":" + total + ",\"distinct\":" + seen.size()
                    + ",\"duplicates\":" + duplicates + ",\"duplicate_keys\":[" + String.join(",", dupKeys) + "]"
                    + ",\"gaps\":" + gapCount + ",\"missing\":[" + String.join(",", gaps) + "]"
                    + ",\"first\":{" + String.join(",", numbers.entrySet().stream()
                            .map(e -> quote(e.getKey()) + ":" + e.getValue().first()).toList()) + "}"
                    + ",\"ends\":[" + String.join(",", endItems) + "]");
        }
    }

    // --- arguments ----------------------------------------------------------------

    static Map<String, List<String>> parse(String[] args) {
        Map<String, List<String>> opts = new HashMap<>();
        for (int i = 1; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --name value at " + args[i]);
            }
            opts.computeIfAbsent(args[i].substring(2), k -> new ArrayList<>()).add(args[i + 1]);
        }
        return opts;
    }

    static String one(Map<String, List<String>> opts, String name) {
        List<String> values = opts.get(name);
        if (values == null || values.isEmpty()) throw new IllegalArgumentException("missing --" + name);
        return values.get(values.size() - 1);
    }
}
