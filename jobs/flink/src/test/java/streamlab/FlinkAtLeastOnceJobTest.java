package streamlab;

import static org.junit.jupiter.api.Assertions.assertEquals;
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

class FlinkAtLeastOnceJobTest {
    private static final String[] ARGS = {
        "--bootstrap", "k1:9092,k2:9092", "--input-topic", "in", "--output-topic", "out", "--group-id", "g",
    };
    /** The same literal as SinkSettingsTest.DEFAULT_PRODUCER and the Storm job's test. */
    private static final Map<String, String> DEFAULT_PRODUCER = Map.of(
            "acks", "all", "linger.ms", "5", "batch.size", "65536", "compression.type", "none",
            "enable.idempotence", "true", "max.in.flight.requests.per.connection", "5");

    @Test
    void parsesDefaults() {
        FlinkAtLeastOnceJob.Options o = FlinkAtLeastOnceJob.Options.parse(ARGS);
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
        FlinkAtLeastOnceJob.Options options = FlinkAtLeastOnceJob.Options.parse(argv);
        Properties producer = FlinkAtLeastOnceJob.producerConfig(FlinkAtLeastOnceJob.sink(options));
        assertEquals("SASL_SSL", producer.get("security.protocol"));
        assertEquals("SCRAM-SHA-512", producer.get("sasl.mechanism"));
    }

    @Test
    void rejectsMissingUnknownAndBadOptions() {
        assertThrows(IllegalArgumentException.class, () -> parse("--bootstrap", "x"));
        assertThrows(IllegalArgumentException.class, () -> FlinkAtLeastOnceJob.Options.parse(new String[] {"--bootstrap", "x"}));
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
        FlinkAtLeastOnceJob.Options o = parse(append(ARGS, "--checkpoint-interval-s", "3", "--parallelism", "4",
                "--tolerable-failed-checkpoints", "5", "--restart-attempts", "7", "--restart-delay-s=1"));
        Configuration conf = FlinkAtLeastOnceJob.jobConfiguration(o);
        assertEquals("fixed-delay", conf.get(RestartStrategyOptions.RESTART_STRATEGY));
        assertEquals(7, conf.get(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS));
        assertEquals(Duration.ofSeconds(1), conf.get(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY));

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        FlinkAtLeastOnceJob.build(env, o);
        StreamGraph graph = env.getStreamGraph();
        graph.setJobName(o.jobName());

        assertEquals(CheckpointingMode.AT_LEAST_ONCE, graph.getCheckpointConfig().getCheckpointingConsistencyMode());
        assertEquals(3000L, graph.getCheckpointConfig().getCheckpointInterval());
        assertEquals(5, graph.getCheckpointConfig().getTolerableCheckpointFailureNumber());
        assertEquals("fixed-delay", graph.getJobConfiguration().get(RestartStrategyOptions.RESTART_STRATEGY));

        Map<String, StreamNode> byUid = graph.getStreamNodes().stream()
                .filter(n -> n.getTransformationUID() != null)
                .collect(Collectors.toMap(StreamNode::getTransformationUID, Function.identity()));
        assertTrue(byUid.get(FlinkAtLeastOnceJob.SOURCE_UID).getOperatorName().contains("kafka-source"));
        assertTrue(byUid.get(FlinkAtLeastOnceJob.ENRICH_UID).getOperatorName().contains("enrich"));
        assertTrue(byUid.get(FlinkAtLeastOnceJob.SINK_UID).getOperatorName().contains("kafka-sink"));
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
        FlinkAtLeastOnceJob.Options o = parse(append(ARGS, "--parallelism", "4", "--sink-linger-ms", "20",
                "--sink-compression", "lz4"));
        StreamExecutionEnvironment env =
                StreamExecutionEnvironment.getExecutionEnvironment(FlinkAtLeastOnceJob.jobConfiguration(o));
        Map<String, String> settings = FlinkAtLeastOnceJob.build(env, o);

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
        expected.put("streamlab.sink.delivery_guarantee", "at-least-once");
        expected.put("streamlab.kafka_clients_version", AppInfoParser.getVersion());
        expected.put("streamlab.connector_version", ReadBack.buildProperties(FlinkAtLeastOnceJob.class)
                .getProperty("connector.version"));
        expected.put("streamlab.checkpoint_interval_ms", "5000");
        expected.put("streamlab.checkpointing_mode", "AT_LEAST_ONCE");
        expected.put("streamlab.tolerable_failed_checkpoints", "3");
        expected.put("streamlab.restart_strategy", "fixed-delay");
        expected.put("streamlab.restart_attempts", "1000000");
        expected.put("streamlab.restart_delay_ms", "2000");
        expected.put("streamlab.offset_commit", "on checkpoint completion");
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
    void versionsMatchTheBuild() {
        Properties build = ReadBack.buildProperties(FlinkAtLeastOnceJob.class);
        assertEquals("flink", build.getProperty("engine"));
        // The jar is compiled against the Flink it reports (-Dflink.version) and bundles the pinned kafka-clients.
        assertEquals(EnvironmentInformation.getVersion(), build.getProperty("engine.version"));
        assertEquals(AppInfoParser.getVersion(), build.getProperty("kafka.clients.version"));
        assertTrue(build.getProperty("connector.version").endsWith("-" + build.getProperty("engine.version")
                .replaceAll("^(\\d+\\.\\d+).*", "$1")), build.toString());
    }

    @Test
    void sinkGetsTheSharedProducerSettings() {
        KafkaSink<KafkaRecord> sink = FlinkAtLeastOnceJob.sink(parse(ARGS));
        Properties props = FlinkAtLeastOnceJob.producerConfig(sink);
        // Read back from the built sink: the builder's own serializer is there too.
        assertEquals("org.apache.kafka.common.serialization.ByteArraySerializer", props.get("key.serializer"));
        for (Map.Entry<String, String> e : DEFAULT_PRODUCER.entrySet()) {
            assertEquals(e.getValue(), props.get(e.getKey()), e.getKey());
        }
        assertEquals(SinkSettings.defaults().describe(), SinkSettings.describe(props));
    }

    @Test
    void deliberateLossDropsEveryNthIdAndIsReadBack() throws Exception {
        FlinkAtLeastOnceJob.EnrichFunction enrich = new FlinkAtLeastOnceJob.EnrichFunction(new DeliberateLoss(2));
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
        Map<String, String> settings = FlinkAtLeastOnceJob.build(env, FlinkAtLeastOnceJob.Options.parse(withOption("--test-drop-every", "2")));
        assertEquals("2", settings.get("streamlab.test_drop_every"));
    }

    @Test
    void enrichFunctionRoundTrip() throws Exception {
        KafkaRecord out = new FlinkAtLeastOnceJob.EnrichFunction().map(new KafkaRecord(null, "{\"msg_id\": 3, \"sent_ms\": 10}"));
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

    private static FlinkAtLeastOnceJob.Options parse(String... argv) {
        return FlinkAtLeastOnceJob.Options.parse(argv);
    }

    private static String[] append(String[] base, String... extra) {
        String[] out = java.util.Arrays.copyOf(base, base.length + extra.length);
        System.arraycopy(extra, 0, out, base.length, extra.length);
        return out;
    }
}
