package streamlab;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

class SparkJobTest {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private static String[] argv(String... extra) {
        List<String> all = new ArrayList<>(List.of("--bootstrap", "h:9092", "--input-topic", "in",
                "--output-topic", "out", "--group-id", "g", "--name", "streamlab-x", "--checkpoint-dir", "/tmp/c"));
        all.addAll(List.of(extra));
        return all.toArray(new String[0]);
    }

    @Test
    void aPlanCarriesTheSettingsTheQueryRunsWith() throws Exception {
        JsonNode plan = MAPPER.readTree(SparkJob.plan(argv("--trigger-interval-ms", "500", "--sink-linger-ms", "7")));
        assertEquals("micro_batch", plan.get("trigger").asText());
        assertEquals(500, plan.get("trigger_interval_ms").asLong());
        assertEquals("7", plan.get("producer").get("linger.ms").asText());
        JsonNode settings = plan.get("settings");
        assertEquals("spark", settings.get("streamlab.engine").asText());
        assertEquals("at_least_once", settings.get("streamlab.guarantee").asText());
        assertEquals("7", settings.get("streamlab.sink.linger_ms").asText());
        assertEquals("4.0.1", settings.get("streamlab.build_engine_version").asText());
    }

    @Test
    void otherGuaranteesAndImpossibleTriggersAreRefused() {
        IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
                () -> SparkJob.plan(argv("--guarantee", "exactly_once")));
        assertTrue(refused.getMessage().contains("at-least-once only"), refused.getMessage());
        assertThrows(IllegalArgumentException.class, () -> SparkJob.plan(argv("--guarantee", "at_most_once")));
        assertThrows(IllegalArgumentException.class,
                () -> SparkJob.plan(argv("--trigger", "continuous", "--trigger-interval-ms", "0")));
        assertThrows(IllegalArgumentException.class,
                () -> SparkJob.plan(argv("--trigger", "continuous", "--max-offsets-per-trigger", "10")));
        assertThrows(IllegalArgumentException.class, () -> SparkJob.plan(argv("--trigger", "once")));
    }

    @Test
    void endOffsetsBecomeEachPartitionsNextOffset() throws Exception {
        var offsets = SparkOffsetCommitter.parse("{\"in\":{\"0\":42,\"1\":7}}");
        assertEquals(2, offsets.size());
        assertEquals(42, offsets.get(new TopicPartition("in", 0)).offset());
        assertEquals(7, offsets.get(new TopicPartition("in", 1)).offset());
    }

    @Test
    void theFunctionIsEnrichWithTheSparkEngine() throws Exception {
        String[] out = new SparkEnrich().call(null, "{\"msg_id\": 3, \"sent_ms\": 1}");
        assertEquals("3", out[0]);
        JsonNode value = MAPPER.readTree(out[1]);
        assertEquals("spark", value.get("engine").asText());
        assertTrue(value.get("processed_ms").asLong() > 0);
    }
}
