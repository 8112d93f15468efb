// A Java consume -> process -> produce loop in transactions, for the exactly-once chaos run
// (reliability/eos_chaos.py, issue 34).
//
// A test fixture, not product: KafkaConsumer plus a transactional KafkaProducer, written as
// Kafka's own examples/ExactlyOnceMessageProcessor.java writes it (one transaction per
// poll: beginTransaction, send, sendOffsetsToTransaction(offsets, groupMetadata()),
// commitTransaction; on an abortable error abortTransaction and seek back to the committed
// offsets; on a fatal one exit). No logic of coopconsumer lives here. Built by
// reliability/java_loop.py with javac against kafka-clients of the test broker's own
// distribution, as tests/peers/_build.py builds PeerMember.java.
//
//   java PeerEosLoop --bootstrap H:P --group G --input IN --output OUT --txn-id ID --slot N
//        --ledger PATH [--protocol classic|consumer] [--session-timeout-ms MS]
//        [--txn-timeout-ms MS] [--batch-size N] [--process-sleep-s S]
//
// Every input record becomes one output record: the input's key, and the value
// "partition:offset:slot", so the checker can count copies per input record. The ledger
// has the JSON lines reliability/eos_member.py writes (start, assigned, revoked, lost,
// batch, batch_done, stats every 2 s, exit). SIGTERM: finish the current transaction,
// close, exit. Exit status 3 after a fatal transactional error (the runner restarts the
// slot with the same transactional.id), 4 after anything else.

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class PeerEosLoop {
    private static final int EXIT_FATAL = 3;
    private static final int EXIT_OTHER = 4;

    private static FileOutputStream ledger;
    private static volatile boolean stopping = false;
    private static long committed = 0;
    private static long aborted = 0;
    private static long processed = 0;
    private static long replayed = 0;
    private static final Map<String, Long> ABORTS = new TreeMap<>();

    public static void main(String[] args) throws Exception {
        Map<String, String> o = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            o.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        ledger = new FileOutputStream(o.get("ledger"), true);
        int code = run(o);
        System.exit(code);
    }

    // --- the ledger --------------------------------------------------------------

    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    private static synchronized void write(String ev, String fields) {
        double t = System.nanoTime() / 1e9; // CLOCK_MONOTONIC, as Python's time.monotonic()
        String line = "{\"ev\":" + quote(ev) + ",\"t\":" + t
                + (fields.isEmpty() ? "" : "," + fields) + "}\n";
        try {
            ledger.write(line.getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            // The ledger is evidence only; the loop goes on.
        }
    }

    private static String tps(Collection<TopicPartition> partitions) {
        StringBuilder b = new StringBuilder("[");
        for (TopicPartition tp : partitions) {
            if (b.length() > 1) {
                b.append(',');
            }
            b.append('[').append(quote(tp.topic())).append(',').append(tp.partition()).append(']');
        }
        return b.append(']').toString();
    }

    private static synchronized String stats() {
        StringBuilder a = new StringBuilder("{");
        for (Map.Entry<String, Long> e : ABORTS.entrySet()) {
            if (a.length() > 1) {
                a.append(',');
            }
            a.append(quote(e.getKey())).append(':').append(e.getValue());
        }
        a.append('}');
        return "{\"transactions_committed\":" + committed + ",\"transactions_aborted\":" + aborted
                + ",\"aborts\":" + a + ",\"records_processed\":" + processed
                + ",\"records_produced\":" + processed + ",\"records_replayed\":" + replayed
                + ",\"commits_on_revoke\":0}";
    }

    private static int exit(String why, int code, Throwable error) {
        String text = "null";
        if (error != null) {
            String full = error.getClass().getSimpleName() + ": " + error.getMessage();
            text = quote(full.substring(0, Math.min(500, full.length())));
        }
        write("exit", "\"why\":" + quote(why) + ",\"code\":" + code + ",\"error\":" + text
                + ",\"stats\":" + stats());
        return code;
    }

    // --- the loop ----------------------------------------------------------------

    private static int run(Map<String, String> o) {
        String input = o.get("input");
        String output = o.get("output");
        String slot = o.get("slot");
        long processSleepMs = (long) (Double.parseDouble(o.getOrDefault("process-sleep-s", "0.05"))
                * 1000);

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, o.get("group"));
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "slot-" + slot);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, o.getOrDefault("batch-size", "200"));
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                ByteArrayDeserializer.class.getName());
        if (o.getOrDefault("protocol", "classic").equals("consumer")) {
            cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        } else {
            int session = Integer.parseInt(o.getOrDefault("session-timeout-ms", "6000"));
            cp.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
            cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, String.valueOf(session));
            cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG,
                    String.valueOf(Math.max(100, session / 10)));
        }
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, o.get("txn-id"));
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, o.getOrDefault("txn-timeout-ms", "10000"));
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        write("start", "\"pid\":" + ProcessHandle.current().pid() + ",\"impl\":\"java\""
                + ",\"txn_id\":" + quote(o.get("txn-id")));
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp);
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping = true;
            consumer.wakeup();
            try {
                main.join(30_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        try {
            producer.initTransactions();
        } catch (KafkaException e) {
            return exit("fatal", EXIT_FATAL, e);
        }
        consumer.subscribe(List.of(input), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                // Nothing is open here: each transaction ends inside one loop iteration.
                write("revoked", "\"tps\":" + tps(partitions));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                write("assigned", "\"tps\":" + tps(partitions));
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                write("lost", "\"tps\":" + tps(partitions));
            }
        });
        long lastStats = 0;
        try {
            while (!stopping) {
                long now = System.nanoTime();
                if (now - lastStats > 2_000_000_000L) {
                    lastStats = now;
                    write("stats", "\"stats\":" + stats());
                }
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    break;
                }
                if (records.isEmpty()) {
                    continue;
                }
                int n = records.count();
                write("batch", "\"n\":" + n);
                try {
                    producer.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        String value = r.partition() + ":" + r.offset() + ":" + slot;
                        producer.send(new ProducerRecord<>(output, r.key(),
                                value.getBytes(StandardCharsets.UTF_8)));
                        offsets.put(new TopicPartition(r.topic(), r.partition()),
                                new OffsetAndMetadata(r.offset() + 1));
                    }
                    if (processSleepMs > 0) {
                        Thread.sleep(processSleepMs);
                    }
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    commit(producer);
                    synchronized (PeerEosLoop.class) {
                        committed++;
                        processed += n;
                    }
                } catch (ProducerFencedException | FencedInstanceIdException
                        | OutOfOrderSequenceException | AuthorizationException
                        | UnsupportedVersionException | InvalidProducerEpochException e) {
                    return exit("fatal", EXIT_FATAL, e);
                } catch (KafkaException e) {
                    // Abortable (a rebalance fenced the offsets, a timeout, ...): abort and
                    // read again from the committed offsets.
                    try {
                        producer.abortTransaction();
                    } catch (KafkaException fatal) {
                        return exit("fatal", EXIT_FATAL, fatal);
                    }
                    synchronized (PeerEosLoop.class) {
                        aborted++;
                        replayed += n;
                        ABORTS.merge(e.getClass().getSimpleName(), 1L, Long::sum);
                    }
                    rewind(consumer);
                }
                write("batch_done", "");
            }
            consumer.close();
            producer.close(Duration.ofSeconds(10));
        } catch (InterruptedException e) {
            return exit("error", EXIT_OTHER, e);
        } catch (RuntimeException e) {
            return exit("error", EXIT_OTHER, e);
        }
        return exit("term", 0, null);
    }

    /** commitTransaction; a timeout must be retried by the same call (KafkaProducer's rule). */
    private static void commit(KafkaProducer<byte[], byte[]> producer) {
        for (int attempt = 1;; attempt++) {
            try {
                producer.commitTransaction();
                return;
            } catch (TimeoutException e) {
                if (attempt >= 5) {
                    throw e;
                }
            }
        }
    }

    private static void rewind(KafkaConsumer<byte[], byte[]> consumer) {
        var assignment = consumer.assignment();
        if (assignment.isEmpty()) {
            return;
        }
        Map<TopicPartition, OffsetAndMetadata> committedOffsets =
                consumer.committed(assignment, Duration.ofSeconds(30));
        for (TopicPartition tp : assignment) {
            OffsetAndMetadata offset = committedOffsets.get(tp);
            if (offset != null) {
                consumer.seek(tp, offset.offset());
            } else {
                consumer.seekToBeginning(List.of(tp));
            }
        }
    }
}
