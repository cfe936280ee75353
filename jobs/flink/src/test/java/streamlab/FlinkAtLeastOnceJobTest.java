package streamlab;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.graph.StreamNode;
import org.junit.jupiter.api.Test;

class FlinkAtLeastOnceJobTest {
    private static final String[] ARGS = {
        "--bootstrap", "k1:9092,k2:9092", "--input-topic", "in", "--output-topic", "out", "--group-id", "g",
    };

    @Test
    void parsesDefaults() {
        FlinkAtLeastOnceJob.Options o = FlinkAtLeastOnceJob.Options.parse(ARGS);
        assertEquals("k1:9092,k2:9092", o.bootstrap());
        assertEquals(5, o.checkpointIntervalS());
        assertNull(o.parallelism());
        assertEquals(1_000_000, o.restartAttempts());
        assertEquals(2, o.restartDelayS());
        assertEquals("streamlab-flink-in", o.jobName());
    }

    @Test
    void rejectsMissingAndUnknownOptions() {
        assertThrows(IllegalArgumentException.class, () -> FlinkAtLeastOnceJob.Options.parse(new String[] {"--bootstrap", "x"}));
        assertThrows(IllegalArgumentException.class,
                () -> FlinkAtLeastOnceJob.Options.parse(append(ARGS, "--parralelism", "2")));
        assertThrows(IllegalArgumentException.class,
                () -> FlinkAtLeastOnceJob.Options.parse(append(ARGS, "--checkpoint-interval-s")));
    }

    @Test
    void buildsTheStreamGraphWithAtLeastOnceCheckpointsAndFixedDelayRestarts() {
        FlinkAtLeastOnceJob.Options o = FlinkAtLeastOnceJob.Options.parse(append(ARGS,
                "--checkpoint-interval-s", "3", "--parallelism", "4", "--restart-attempts", "7", "--restart-delay-s=1"));
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
        assertEquals("fixed-delay", graph.getJobConfiguration().get(RestartStrategyOptions.RESTART_STRATEGY));

        Map<String, StreamNode> byUid = graph.getStreamNodes().stream()
                .filter(n -> n.getTransformationUID() != null)
                .collect(Collectors.toMap(StreamNode::getTransformationUID, Function.identity()));
        assertTrue(byUid.get(FlinkAtLeastOnceJob.SOURCE_UID).getOperatorName().contains("kafka-source"));
        assertTrue(byUid.get(FlinkAtLeastOnceJob.ENRICH_UID).getOperatorName().contains("enrich"));
        assertTrue(byUid.get(FlinkAtLeastOnceJob.SINK_UID).getOperatorName().contains("kafka-sink"));
        byUid.values().forEach(n -> assertEquals(4, n.getParallelism(), n.getOperatorName()));

        JobGraph jobGraph = graph.getJobGraph();
        assertNotNull(jobGraph.getCheckpointingSettings());
        assertEquals("streamlab-flink-in", jobGraph.getName());
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

    private static String[] append(String[] base, String... extra) {
        String[] out = java.util.Arrays.copyOf(base, base.length + extra.length);
        System.arraycopy(extra, 0, out, base.length, extra.length);
        return out;
    }
}
