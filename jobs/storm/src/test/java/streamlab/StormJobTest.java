package streamlab;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.storm.Config;
import org.apache.storm.generated.Bolt;
import org.apache.storm.generated.GlobalStreamId;
import org.apache.storm.generated.Grouping;
import org.apache.storm.generated.NullStruct;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.kafka.bolt.KafkaBolt;
import org.apache.storm.kafka.spout.FirstPollOffsetStrategy;
import org.apache.storm.kafka.spout.KafkaSpoutConfig;
import org.apache.storm.policy.WaitStrategyPark;
import org.apache.storm.tuple.Values;
import org.apache.storm.utils.Utils;
import org.apache.storm.utils.VersionInfo;
import org.apache.storm.validation.ConfigValidation;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class StormJobTest {
    private static final String[] ARGS = {
        "--bootstrap", "k1:9092,k2:9092", "--input-topic", "in", "--output-topic", "out", "--group-id", "g",
    };
    /** The same literal as SinkSettingsTest.DEFAULT_PRODUCER and the Flink job's test. */
    private static final Map<String, String> DEFAULT_PRODUCER = Map.of(
            "acks", "all", "linger.ms", "5", "batch.size", "65536", "compression.type", "none",
            "enable.idempotence", "true", "max.in.flight.requests.per.connection", "5");
    private static final String PARK = "org.apache.storm.policy.WaitStrategyPark";
    private static final List<String> WAIT_KEYS = List.of(
            "topology.spout.wait.strategy", "topology.spout.wait.park.microsec",
            "topology.bolt.wait.strategy", "topology.bolt.wait.park.microsec",
            "topology.backpressure.wait.strategy", "topology.backpressure.wait.park.microsec");

    @Test
    void parsesDefaults() {
        StormJob.Options o = parse(ARGS);
        assertEquals("streamlab-storm-in", o.name());
        assertEquals(2, o.workers());
        assertEquals(2, o.spoutParallelism());
        assertEquals(2, o.boltParallelism());
        assertEquals(2, o.ackers());
        assertEquals(30, o.messageTimeoutS());
        assertEquals(1000, o.maxSpoutPending());
        assertEquals(30_000L, o.offsetCommitPeriodMs());
        assertEquals("park", o.waitStrategy());
        assertEquals(100L, o.waitParkUs());
        assertEquals(DEFAULT_PRODUCER, Map.copyOf(o.sink().toProperties()));
    }

    @Test
    void parallelismDefaultsFollowWorkersThenSpouts() {
        StormJob.Options o = parse(append(ARGS, "--workers", "3", "--name", "t1"));
        assertEquals(3, o.spoutParallelism());
        assertEquals(3, o.boltParallelism());
        assertEquals(3, o.ackers());
        assertEquals("t1", o.name());
        o = parse(append(ARGS, "--workers", "2", "--spout-parallelism", "4"));
        assertEquals(4, o.boltParallelism());
        assertEquals(2, o.ackers());
        o = parse(append(ARGS, "--spout-parallelism", "4", "--bolt-parallelism", "6"));
        assertEquals(6, o.boltParallelism());
    }

    @Test
    void rejectsBadOptions() {
        assertThrows(IllegalArgumentException.class, () -> parse("--bootstrap", "x"));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--wrokers", "2")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--ackers", "0")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--workers", "two")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--spout-parallelism", "0")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--offset-commit-period-ms", "0")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--wait-strategy", "spin")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--wait-park-us", "-1")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--sink-max-in-flight", "6")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--sink-batch-size", "64k")));
        // Flink-only options are unknown here.
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--tolerable-failed-checkpoints", "3")));
    }

    @Test
    void configSetsStormKeysAndParkWaitStrategies() {
        StormJob.Options o = parse(append(ARGS, "--workers", "3", "--message-timeout-s", "20",
                "--max-spout-pending", "500", "--ackers", "1", "--wait-park-us", "50"));
        Config conf = StormJob.config(o);
        assertEquals(3, conf.get(Config.TOPOLOGY_WORKERS));
        assertEquals(20, conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS));
        assertEquals(500, conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING));
        assertEquals(1, conf.get(Config.TOPOLOGY_ACKER_EXECUTORS));
        // The constants are storm-client 2.8.3's; the literals are what Nimbus and the workers read.
        assertEquals(WAIT_KEYS, List.of(Config.TOPOLOGY_SPOUT_WAIT_STRATEGY, Config.TOPOLOGY_SPOUT_WAIT_PARK_MICROSEC,
                Config.TOPOLOGY_BOLT_WAIT_STRATEGY, Config.TOPOLOGY_BOLT_WAIT_PARK_MICROSEC,
                Config.TOPOLOGY_BACKPRESSURE_WAIT_STRATEGY, Config.TOPOLOGY_BACKPRESSURE_WAIT_PARK_MICROSEC));
        assertEquals(PARK, WaitStrategyPark.class.getName());
        for (int i = 0; i < WAIT_KEYS.size(); i += 2) {
            assertEquals(PARK, conf.get(WAIT_KEYS.get(i)));
            assertEquals(50L, conf.get(WAIT_KEYS.get(i + 1)));
        }
        assertEquals(4 + WAIT_KEYS.size(), conf.size());
        assertTrue(Utils.isValidConf(conf));
        ConfigValidation.validateTopoConf(conf);
    }

    @Test
    void progressiveKeepsStormsWaitStrategies() {
        Config conf = StormJob.config(parse(append(ARGS, "--wait-strategy", "progressive")));
        WAIT_KEYS.forEach(key -> assertFalse(conf.containsKey(key), key));
        assertEquals(4, conf.size());
        assertEquals("progressive", StormJob.waitStrategy(conf));
    }

    @Test
    void submissionRecordsWhatItRunsWith() {
        StormJob.Options o = parse(append(ARGS, "--workers", "3", "--spout-parallelism", "4",
                "--offset-commit-period-ms", "5000", "--sink-linger-ms", "20", "--sink-compression", "lz4"));
        StormJob.Submission submission = StormJob.build(o);
        Config conf = submission.config();

        Map<String, Object> expected = new LinkedHashMap<>();
        expected.put("streamlab.engine", "storm");
        expected.put("streamlab.engine_version", VersionInfo.getVersion());
        expected.put("streamlab.build_engine_version", VersionInfo.getVersion());
        expected.put("streamlab.source_tasks", "4");
        expected.put("streamlab.process_tasks", "4");
        expected.put("streamlab.sink_tasks", "4");
        expected.put("streamlab.grouping", "localOrShuffle");
        expected.put("streamlab.sink.acks", "all");
        expected.put("streamlab.sink.linger_ms", "20");
        expected.put("streamlab.sink.batch_size", "65536");
        expected.put("streamlab.sink.compression", "lz4");
        expected.put("streamlab.sink.idempotence", "true");
        expected.put("streamlab.sink.max_in_flight", "5");
        expected.put("streamlab.kafka.security_protocol", "PLAINTEXT");
        expected.put("streamlab.kafka.sasl_mechanism", "(none)");
        expected.put("streamlab.guarantee", "at_least_once");
        expected.put("streamlab.processing_guarantee", "AT_LEAST_ONCE");
        expected.put("streamlab.ackers", "3");
        expected.put("streamlab.sink.delivery_guarantee", "at-least-once");
        expected.put("streamlab.test_drop_every", "0");
        expected.put("streamlab.kafka_clients_version", AppInfoParser.getVersion());
        expected.put("streamlab.connector_version", VersionInfo.getVersion());
        expected.put("streamlab.offset_commit_period_ms", "5000");
        expected.put("streamlab.offset_commit", "acked offsets, every offset_commit_period_ms");
        expected.put("streamlab.wait_strategy", "park");
        expected.put("streamlab.wait_park_us", "100");
        Map<String, Object> streamlab = new LinkedHashMap<>();
        conf.forEach((k, v) -> {
            if (k.startsWith("streamlab.")) {
                streamlab.put(k, v);
            }
        });
        assertEquals(expected, streamlab);
        // Storm's own keys are still there, and the whole configuration survives Nimbus' JSON round trip.
        assertEquals(3, conf.get(Config.TOPOLOGY_WORKERS));
        assertEquals(3, conf.get(Config.TOPOLOGY_ACKER_EXECUTORS));
        assertEquals(PARK, conf.get(Config.TOPOLOGY_BOLT_WAIT_STRATEGY));
        assertEquals(4 + WAIT_KEYS.size() + expected.size(), conf.size());
        assertTrue(Utils.isValidConf(conf));
        ConfigValidation.validateTopoConf(conf);
    }

    @Test
    void deliberateLossIsReadBackFromTheSubmittedBoltAndAcksWithoutEmitting() {
        StormJob.Options o = parse(append(ARGS, "--test-drop-every", "3"));
        StormJob.Submission submission = StormJob.build(o);
        assertEquals("3", submission.config().get("streamlab.test_drop_every"));
        assertEquals(3, StormJob.loss(submission.topology()));
        assertTrue(o.loss().drops("{\"msg_id\": 6}"));
        assertFalse(o.loss().drops("{\"msg_id\": 7}"));
    }

    @Test
    void atMostOnceCommitsEachPollBeforeEmittingAndRunsNoAckers() {
        StormJob.Submission submission = StormJob.build(parse(append(ARGS, "--guarantee", "at_most_once")));
        Map<String, Object> conf = submission.config();
        assertEquals(0, ((Number) conf.get(Config.TOPOLOGY_ACKER_EXECUTORS)).intValue());
        assertEquals("at_most_once", conf.get("streamlab.guarantee"));
        assertEquals("AT_MOST_ONCE", conf.get("streamlab.processing_guarantee"));
        assertEquals("0", conf.get("streamlab.ackers"));
        assertEquals("none", conf.get("streamlab.sink.delivery_guarantee"));
        assertEquals("each poll, before its records are emitted", conf.get("streamlab.offset_commit"));
        // Ackers with an at-most-once spout only cost threads: refused.
        assertThrows(IllegalArgumentException.class,
                () -> parse(append(ARGS, "--guarantee", "at_most_once", "--ackers", "2")));
    }

    @Test
    void exactlyOnceIsRefusedWithTheReason() {
        IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
                () -> parse(append(ARGS, "--guarantee", "exactly_once")));
        assertTrue(refused.getMessage().contains("KafkaBolt is not transactional"), refused.getMessage());
        assertTrue(refused.getMessage().contains("offered: at_most_once, at_least_once"), refused.getMessage());
    }

    @Test
    void versionsMatchTheBuild() {
        Properties build = ReadBack.buildProperties(StormJob.class);
        assertEquals("storm", build.getProperty("engine"));
        assertEquals(VersionInfo.getVersion(), build.getProperty("engine.version"));
        assertEquals(AppInfoParser.getVersion(), build.getProperty("kafka.clients.version"));
    }

    @Test
    void spoutIsAtLeastOnceFromCommittedOrEarliest() {
        KafkaSpoutConfig<String, String> spout = StormJob.spoutConfig(parse(ARGS));
        assertEquals(KafkaSpoutConfig.ProcessingGuarantee.AT_LEAST_ONCE, spout.getProcessingGuarantee());
        assertEquals(FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST, spout.getFirstPollOffsetStrategy());
        assertEquals("g", spout.getConsumerGroupId());
        Map<String, Object> props = spout.getKafkaProps();
        assertEquals(false, props.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG));
        assertEquals("earliest", props.get(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG));
        assertEquals("k1:9092,k2:9092", props.get(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG));
    }

    @Test
    void producerGetsTheSharedSinkSettings() {
        StormJob.Options o = parse(ARGS);
        Properties props = StormJob.producerProperties(o);
        assertEquals("k1:9092,k2:9092", props.get("bootstrap.servers"));
        DEFAULT_PRODUCER.forEach((key, value) -> assertEquals(value, props.get(key), key));
        assertEquals(DEFAULT_PRODUCER.size() + 3, props.size());

        // What the workers get: the KafkaBolt as serialized into the topology, read back.
        StormTopology topology = StormJob.topology(o);
        byte[] serialized = topology.get_bolts().get(StormJob.SINK_ID).get_bolt_object()
                .get_serialized_java();
        KafkaBolt<?, ?> bolt = Utils.javaDeserialize(serialized, KafkaBolt.class);
        Properties shipped = StormJob.producerConfig(bolt);
        assertEquals(props, shipped);
        assertEquals(SinkSettings.defaults().describe(), SinkSettings.describe(shipped));
    }

    @Test
    void topologyIsSpoutEnrichKafkaBoltWithLocalOrShuffleEdges() {
        StormTopology topology = StormJob.topology(parse(append(ARGS,
                "--spout-parallelism", "3", "--bolt-parallelism", "4")));
        assertEquals(List.of(StormJob.SPOUT_ID), List.copyOf(topology.get_spouts().keySet()));
        assertEquals(3, topology.get_spouts().get(StormJob.SPOUT_ID).get_common().get_parallelism_hint());
        Bolt enrich = topology.get_bolts().get(StormJob.ENRICH_ID);
        Bolt sink = topology.get_bolts().get(StormJob.SINK_ID);
        assertEquals(4, enrich.get_common().get_parallelism_hint());
        assertEquals(4, sink.get_common().get_parallelism_hint());

        Map<GlobalStreamId, Grouping> enrichInputs = enrich.get_common().get_inputs();
        assertEquals(1, enrichInputs.size());
        Map.Entry<GlobalStreamId, Grouping> in = enrichInputs.entrySet().iterator().next();
        assertEquals(StormJob.SPOUT_ID, in.getKey().get_componentId());
        assertEquals(Grouping._Fields.LOCAL_OR_SHUFFLE, in.getValue().getSetField());

        Map<GlobalStreamId, Grouping> sinkInputs = sink.get_common().get_inputs();
        assertEquals(1, sinkInputs.size());
        in = sinkInputs.entrySet().iterator().next();
        assertEquals(StormJob.ENRICH_ID, in.getKey().get_componentId());
        assertEquals(Grouping._Fields.LOCAL_OR_SHUFFLE, in.getValue().getSetField());

        assertEquals("localOrShuffle", StormJob.grouping(enrich, sink));
        assertEquals("shuffle", StormJob.groupingName(Grouping.shuffle(new NullStruct())));
        assertTrue(enrich.get_common().get_streams().get(Utils.DEFAULT_STREAM_ID).get_output_fields()
                .containsAll(List.of("key", "message")));
    }

    @Test
    void translatorKeepsKeyValueAndPosition() {
        List<Object> tuple = new StormJob.KeyValueTranslator()
                .apply(new ConsumerRecord<>("in", 2, 42L, null, "{\"msg_id\": 7}"));
        assertEquals(Arrays.asList(null, "{\"msg_id\": 7}", "in", 2, 42L), tuple);
        assertEquals(StormJob.KeyValueTranslator.FIELDS.size(), tuple.size());
    }

    @Test
    void enrichBoltOutputsKeyAndMessage() throws Exception {
        Values out = StormJob.EnrichBolt.process(null, "{\"msg_id\": 7, \"sent_ms\": 5}");
        assertEquals("7", out.get(0));
        JsonNode json = new ObjectMapper().readTree((String) out.get(1));
        assertEquals("storm", json.get("engine").asText());
        assertEquals(5, json.get("sent_ms").asInt());
        Values bad = StormJob.EnrichBolt.process("k", "{oops");
        assertEquals("k", bad.get(0));
        assertEquals("{oops", new ObjectMapper().readTree((String) bad.get(1)).get("malformed").asText());
        assertNull(StormJob.EnrichBolt.process(null, "nope").get(0));
    }

    @Test
    void theSpoutAndTheSinkBothConnectWithTheClientConfiguration(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("client.properties");
        Files.writeString(file, "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n");
        StormJob.Options options = parse(append(ARGS, "--kafka-config", file.toString()));
        assertEquals("SASL_SSL", StormJob.spoutConfig(options).getKafkaProps().get("security.protocol"));
        Properties producer = StormJob.producerProperties(options);
        assertEquals("SASL_SSL", producer.get("security.protocol"));
        assertEquals("SCRAM-SHA-512", producer.get("sasl.mechanism"));
    }

    private static StormJob.Options parse(String... argv) {
        return StormJob.Options.parse(argv);
    }

    private static String[] append(String[] base, String... extra) {
        String[] out = Arrays.copyOf(base, base.length + extra.length);
        System.arraycopy(extra, 0, out, base.length, extra.length);
        return out;
    }
}
