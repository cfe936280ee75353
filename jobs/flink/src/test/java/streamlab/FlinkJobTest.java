package streamlab;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.apache.flink.api.common.ArchivedExecutionConfig;
import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.JobVertex;
import org.apache.flink.runtime.jobgraph.tasks.JobCheckpointingSettings;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamEdge;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.graph.StreamNode;
import org.apache.flink.streaming.runtime.partitioner.ForwardPartitioner;
import org.apache.flink.util.Collector;
import org.apache.kafka.common.utils.AppInfoParser;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FlinkJobTest {
    private static final String[] ARGS = {
        "--bootstrap", "k1:9092,k2:9092", "--input-topic", "in", "--output-topic", "out", "--group-id", "g",
    };
    /** The same literal as SinkSettingsTest.DEFAULT_PRODUCER and the Storm job's test. */
    private static final Map<String, String> DEFAULT_PRODUCER = Map.of(
            "acks", "all", "linger.ms", "5", "batch.size", "65536", "compression.type", "none",
            "enable.idempotence", "true", "max.in.flight.requests.per.connection", "5");

    @Test
    void parsesDefaults() {
        FlinkJob.Options o = FlinkJob.Options.parse(ARGS);
        assertEquals("k1:9092,k2:9092", o.bootstrap());
        assertEquals(5, o.checkpointIntervalS());
        assertNull(o.parallelism());
        assertEquals(3, o.tolerableFailedCheckpoints());
        assertEquals(1_000_000, o.restartAttempts());
        assertEquals(2, o.restartDelayS());
        assertEquals(DEFAULT_PRODUCER, Map.copyOf(o.sink().toProperties()));
        assertEquals("streamlab-flink-in", o.jobName());
    }

    @Test
    void theSinkConnectsWithTheClientConfiguration(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("client.properties");
        Files.writeString(file, "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n");
        String[] argv = Arrays.copyOf(ARGS, ARGS.length + 2);
        argv[ARGS.length] = "--kafka-config";
        argv[ARGS.length + 1] = file.toString();
        FlinkJob.Options options = FlinkJob.Options.parse(argv);
        Properties producer = FlinkJob.producerConfig(FlinkJob.sink(options));
        assertEquals("SASL_SSL", producer.get("security.protocol"));
        assertEquals("SCRAM-SHA-512", producer.get("sasl.mechanism"));
    }

    @Test
    void rejectsMissingUnknownAndBadOptions() {
        assertThrows(IllegalArgumentException.class, () -> parse("--bootstrap", "x"));
        assertThrows(IllegalArgumentException.class, () -> FlinkJob.Options.parse(new String[] {"--bootstrap", "x"}));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--parralelism", "2")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--checkpoint-interval-s")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--parallelism", "0")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--parallelism", "four")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--tolerable-failed-checkpoints", "-1")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--restart-delay-s", "-1")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--sink-acks", "2")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--sink-compression", "brotli")));
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--sink-idempotence", "yes")));
        // Storm-only options are unknown here.
        assertThrows(IllegalArgumentException.class, () -> parse(append(ARGS, "--wait-strategy", "park")));
    }

    @Test
    void buildsOneChainedTaskWithAtLeastOnceCheckpointsAndFixedDelayRestarts() throws Exception {
        FlinkJob.Options o = parse(append(ARGS, "--checkpoint-interval-s", "3", "--parallelism", "4",
                "--tolerable-failed-checkpoints", "5", "--restart-attempts", "7", "--restart-delay-s=1"));
        Configuration conf = FlinkJob.jobConfiguration(o);
        assertEquals("fixed-delay", conf.get(RestartStrategyOptions.RESTART_STRATEGY));
        assertEquals(7, conf.get(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS));
        assertEquals(Duration.ofSeconds(1), conf.get(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY));

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        FlinkJob.build(env, o);
        StreamGraph graph = env.getStreamGraph();
        graph.setJobName(o.jobName());

        assertEquals(CheckpointingMode.AT_LEAST_ONCE, graph.getCheckpointConfig().getCheckpointingConsistencyMode());
        assertEquals(3000L, graph.getCheckpointConfig().getCheckpointInterval());
        assertEquals(5, graph.getCheckpointConfig().getTolerableCheckpointFailureNumber());
        assertEquals("fixed-delay", graph.getJobConfiguration().get(RestartStrategyOptions.RESTART_STRATEGY));

        Map<String, StreamNode> byUid = graph.getStreamNodes().stream()
                .filter(n -> n.getTransformationUID() != null)
                .collect(Collectors.toMap(StreamNode::getTransformationUID, Function.identity()));
        assertTrue(byUid.get(FlinkJob.SOURCE_UID).getOperatorName().contains("kafka-source"));
        assertTrue(byUid.get(FlinkJob.ENRICH_UID).getOperatorName().contains("enrich"));
        assertTrue(byUid.get(FlinkJob.SINK_UID).getOperatorName().contains("kafka-sink"));
        byUid.values().forEach(n -> assertEquals(4, n.getParallelism(), n.getOperatorName()));
        // Every edge is forward, and the whole pipeline is one chained task.
        for (StreamNode node : graph.getStreamNodes()) {
            for (StreamEdge edge : node.getOutEdges()) {
                assertTrue(edge.getPartitioner() instanceof ForwardPartitioner, edge.toString());
            }
        }
        JobGraph jobGraph = graph.getJobGraph();
        List<JobVertex> vertices = List.of(jobGraph.getVerticesAsArray());
        assertEquals(1, vertices.size(), vertices.toString());
        assertEquals(4, vertices.get(0).getParallelism());
        JobCheckpointingSettings checkpointing = jobGraph.getCheckpointingSettings();
        assertNotNull(checkpointing);
        assertEquals(5, checkpointing.getCheckpointCoordinatorConfiguration().getTolerableCheckpointFailureNumber());
        assertEquals("streamlab-flink-in", jobGraph.getName());
    }

    @Test
    void publishesWhatItRunsWithAsGlobalJobParameters() throws Exception {
        FlinkJob.Options o = parse(append(ARGS, "--parallelism", "4", "--sink-linger-ms", "20",
                "--sink-compression", "lz4"));
        StreamExecutionEnvironment env =
                StreamExecutionEnvironment.getExecutionEnvironment(FlinkJob.jobConfiguration(o));
        Map<String, String> settings = FlinkJob.build(env, o);

        Map<String, String> expected = new LinkedHashMap<>();
        expected.put("streamlab.engine", "flink");
        expected.put("streamlab.engine_version", EnvironmentInformation.getVersion());
        expected.put("streamlab.build_engine_version", EnvironmentInformation.getVersion());
        expected.put("streamlab.source_tasks", "4");
        expected.put("streamlab.process_tasks", "4");
        expected.put("streamlab.sink_tasks", "4");
        expected.put("streamlab.grouping", "forward (chained)");
        expected.put("streamlab.sink.acks", "all");
        expected.put("streamlab.sink.linger_ms", "20");
        expected.put("streamlab.sink.batch_size", "65536");
        expected.put("streamlab.sink.compression", "lz4");
        expected.put("streamlab.sink.idempotence", "true");
        expected.put("streamlab.sink.max_in_flight", "5");
        expected.put("streamlab.kafka.security_protocol", "PLAINTEXT");
        expected.put("streamlab.kafka.sasl_mechanism", "(none)");
        expected.put("streamlab.guarantee", "at_least_once");
        expected.put("streamlab.sink.delivery_guarantee", "at-least-once");
        expected.put("streamlab.kafka_clients_version", AppInfoParser.getVersion());
        expected.put("streamlab.connector_version", ReadBack.buildProperties(FlinkJob.class)
                .getProperty("connector.version"));
        expected.put("streamlab.checkpoint_interval_ms", "5000");
        expected.put("streamlab.checkpointing_mode", "AT_LEAST_ONCE");
        expected.put("streamlab.tolerable_failed_checkpoints", "3");
        expected.put("streamlab.restart_strategy", "fixed-delay");
        expected.put("streamlab.restart_attempts", "1000000");
        expected.put("streamlab.restart_delay_ms", "2000");
        expected.put("streamlab.offset_commit", "on checkpoint completion");
        expected.put("streamlab.starting_offsets", "committed, else earliest");
        expected.put("streamlab.test_drop_every", "0");
        assertEquals(expected, settings);
        assertEquals(expected, env.getConfig().getGlobalJobParameters().toMap());

        // What GET /jobs/<id>/config shows under execution-config.user-config: the JobGraph's ExecutionConfig,
        // archived the way the JobManager's JobConfigHandler does it.
        JobGraph jobGraph = env.getStreamGraph().getJobGraph();
        ExecutionConfig shipped = jobGraph.getSerializedExecutionConfig().deserializeValue(getClass().getClassLoader());
        ArchivedExecutionConfig archived = shipped.archive();
        assertEquals(expected, archived.getGlobalJobParameters());
        assertEquals(4, archived.getParallelism());
    }

    @Test
    void exactlyOnceCheckpointsExactlyOnceIntoATransactionalSinkUniquePerRun() {
        FlinkJob.Options o = parse(append(ARGS, "--guarantee", "exactly_once"));
        StreamExecutionEnvironment env =
                StreamExecutionEnvironment.getExecutionEnvironment(FlinkJob.jobConfiguration(o));
        Map<String, String> settings = FlinkJob.build(env, o);
        assertEquals(CheckpointingMode.EXACTLY_ONCE, env.getCheckpointConfig().getCheckpointingConsistencyMode());
        assertEquals("exactly_once", settings.get("streamlab.guarantee"));
        assertEquals("exactly-once", settings.get("streamlab.sink.delivery_guarantee"));
        assertEquals("EXACTLY_ONCE", settings.get("streamlab.checkpointing_mode"));
        assertEquals(o.groupId() + "-tx", settings.get("streamlab.transactional_id_prefix"));
        assertEquals(Long.toString(FlinkJob.TRANSACTION_TIMEOUT_MS), settings.get("streamlab.transaction_timeout_ms"));
        assertEquals("on checkpoint completion", settings.get("streamlab.offset_commit"));
    }

    @Test
    void atMostOnceHasNoCheckpointsCommitsAsReadAndRestartsAtTheNewestRecord() {
        FlinkJob.Options o = parse(append(ARGS, "--guarantee", "at_most_once"));
        StreamExecutionEnvironment env =
                StreamExecutionEnvironment.getExecutionEnvironment(FlinkJob.jobConfiguration(o));
        Map<String, String> settings = FlinkJob.build(env, o);
        assertFalse(env.getCheckpointConfig().isCheckpointingEnabled());
        assertEquals("at_most_once", settings.get("streamlab.guarantee"));
        assertEquals("none", settings.get("streamlab.sink.delivery_guarantee"));
        assertEquals("none", settings.get("streamlab.checkpointing_mode"));
        assertFalse(settings.containsKey("streamlab.checkpoint_interval_ms"));
        assertEquals("as read, every 1000 ms", settings.get("streamlab.offset_commit"));
        assertEquals("latest, also after a restart", settings.get("streamlab.starting_offsets"));
    }

    @Test
    void atMostOnceSplitsCarryTheNewestOffsetMarkerForTheReaderToResolve() {
        // A marker, not an offset: a split handed back after a failure starts at the newest record again.
        var partitions = List.of(new org.apache.kafka.common.TopicPartition("in", 0),
                new org.apache.kafka.common.TopicPartition("in", 1));
        Map<org.apache.kafka.common.TopicPartition, Long> offsets =
                new NewestOnEveryStart().getPartitionOffsets(partitions, null);
        assertEquals(2, offsets.size());
        offsets.values().forEach(o -> assertEquals(
                org.apache.flink.connector.kafka.source.split.KafkaPartitionSplit.LATEST_OFFSET, o));
    }

    @Test
    void anUnknownGuaranteeOrAnExactlyOnceSinkWithoutIdempotenceIsRefused() {
        IllegalArgumentException unknown = assertThrows(IllegalArgumentException.class,
                () -> parse(append(ARGS, "--guarantee", "twice")));
        assertTrue(unknown.getMessage().contains("at_least_once, at_most_once, exactly_once")
                || unknown.getMessage().contains("at_most_once, at_least_once, exactly_once"), unknown.getMessage());
        IllegalArgumentException idempotence = assertThrows(IllegalArgumentException.class,
                () -> parse(append(ARGS, "--guarantee", "exactly_once", "--sink-idempotence", "false")));
        assertTrue(idempotence.getMessage().contains("--sink-idempotence true"), idempotence.getMessage());
        IllegalArgumentException interval = assertThrows(IllegalArgumentException.class,
                () -> parse(append(ARGS, "--guarantee", "exactly_once", "--checkpoint-interval-s", "600")));
        assertTrue(interval.getMessage().contains("transaction timeout"), interval.getMessage());
    }

    @Test
    void aBrokerMaximumBelowTheTransactionTimeoutIsNamed() {
        Map<String, Long> maxima = new java.util.TreeMap<>(Map.of("1", 900_000L, "2", 60_000L));
        assertEquals(List.of("broker 2: 60000 ms"), TransactionTimeout.tooShort(600_000L, maxima));
        assertEquals(List.of(), TransactionTimeout.tooShort(600_000L, Map.of("1", 900_000L)));
    }

    @Test
    void versionsMatchTheBuild() {
        Properties build = ReadBack.buildProperties(FlinkJob.class);
        assertEquals("flink", build.getProperty("engine"));
        // The jar is compiled against the Flink it reports (-Dflink.version) and bundles the pinned kafka-clients.
        assertEquals(EnvironmentInformation.getVersion(), build.getProperty("engine.version"));
        assertEquals(AppInfoParser.getVersion(), build.getProperty("kafka.clients.version"));
        assertTrue(build.getProperty("connector.version").endsWith("-" + build.getProperty("engine.version")
                .replaceAll("^(\\d+\\.\\d+).*", "$1")), build.toString());
    }

    @Test
    void sinkGetsTheSharedProducerSettings() {
        KafkaSink<KafkaRecord> sink = FlinkJob.sink(parse(ARGS));
        Properties props = FlinkJob.producerConfig(sink);
        // Read back from the built sink: the builder's own serializer is there too.
        assertEquals("org.apache.kafka.common.serialization.ByteArraySerializer", props.get("key.serializer"));
        for (Map.Entry<String, String> e : DEFAULT_PRODUCER.entrySet()) {
            assertEquals(e.getValue(), props.get(e.getKey()), e.getKey());
        }
        assertEquals(SinkSettings.defaults().describe(), SinkSettings.describe(props));
    }

    @Test
    void deliberateLossDropsEveryNthIdAndIsReadBack() throws Exception {
        FlinkJob.EnrichFunction enrich = new FlinkJob.EnrichFunction(new DeliberateLoss(2));
        List<KafkaRecord> out = new ArrayList<>();
        Collector<KafkaRecord> collector = new Collector<>() {
            @Override
            public void collect(KafkaRecord record) {
                out.add(record);
            }

            @Override
            public void close() {}
        };
        for (int id = 1; id <= 5; id++) {
            enrich.flatMap(new KafkaRecord(null, "{\"msg_id\": " + id + "}"), collector);
        }
        assertEquals(List.of("1", "3", "5"), out.stream().map(r -> r.key).toList());
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        Map<String, String> settings = FlinkJob.build(env, FlinkJob.Options.parse(withOption("--test-drop-every", "2")));
        assertEquals("2", settings.get("streamlab.test_drop_every"));
    }

    @Test
    void enrichFunctionRoundTrip() throws Exception {
        KafkaRecord out = new FlinkJob.EnrichFunction().map(new KafkaRecord(null, "{\"msg_id\": 3, \"sent_ms\": 10}"));
        JsonNode json = new ObjectMapper().readTree(out.value);
        assertEquals("3", out.key);
        assertEquals("flink", json.get("engine").asText());
        assertTrue(json.get("processed_ms").asLong() >= 10);
        assertEquals(List.of(3, 10), List.of(json.get("msg_id").asInt(), json.get("sent_ms").asInt()));
    }

    private static String[] withOption(String name, String value) {
        String[] argv = Arrays.copyOf(ARGS, ARGS.length + 2);
        argv[ARGS.length] = name;
        argv[ARGS.length + 1] = value;
        return argv;
    }

    private static FlinkJob.Options parse(String... argv) {
        return FlinkJob.Options.parse(argv);
    }

    private static String[] append(String[] base, String... extra) {
        String[] out = java.util.Arrays.copyOf(base, base.length + extra.length);
        System.arraycopy(extra, 0, out, base.length, extra.length);
        return out;
    }
}
