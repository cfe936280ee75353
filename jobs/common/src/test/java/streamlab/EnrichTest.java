package streamlab;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class EnrichTest {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final String ENGINE = "flink";
    private static final String SAMPLE = "{\"msg_id\": 1024, \"content\": {\"temperature\": 27.63, \"humidity\": 54.21,"
            + " \"timestamp\": 1734258123}, \"timestamp\": \"2025-12-15 14:02:03.456\", \"sent_ms\": 1734258123456}";

    @Test
    void keepsEveryFieldAndAddsEngineAndProcessedMs() throws Exception {
        Enrich.Result out = Enrich.apply(ENGINE, "k-1", SAMPLE, 1734258123999L);
        JsonNode in = MAPPER.readTree(SAMPLE);
        JsonNode json = MAPPER.readTree(out.value);

        assertEquals("k-1", out.key);
        assertEquals(ENGINE, json.get("engine").asText());
        assertTrue(json.get("processed_ms").isIntegralNumber());
        assertEquals(1734258123999L, json.get("processed_ms").asLong());
        List<String> names = new ArrayList<>();
        json.fieldNames().forEachRemaining(names::add);
        assertEquals(List.of("msg_id", "content", "timestamp", "sent_ms", "engine", "processed_ms"), names);
        in.fieldNames().forEachRemaining(name -> assertEquals(in.get(name), json.get(name), name));
        assertEquals(1734258123456L, json.get("sent_ms").asLong());
        assertEquals(27.63, json.get("content").get("temperature").asDouble());
    }

    @Test
    void nullKeyFallsBackToMsgId() throws Exception {
        assertEquals("1024", Enrich.apply(ENGINE, null, SAMPLE, 1L).key);
        assertEquals("abc", Enrich.apply(ENGINE, null, "{\"msg_id\": \"abc\"}", 1L).key);
        assertNull(Enrich.apply(ENGINE, null, "{\"x\": 1}", 1L).key);
        assertNull(Enrich.apply(ENGINE, null, "{\"msg_id\": null}", 1L).key);
        assertEquals("given", Enrich.apply(ENGINE, "given", SAMPLE, 1L).key);
    }

    @Test
    void malformedValuesAreWrappedNotThrown() throws Exception {
        for (String raw : new String[] {"not json", "{\"msg_id\": 1", "", "[1, 2]", "42", "\"str\"",
                "{\"a\": 1} trailing", "null"}) {
            Enrich.Result out = Enrich.apply(ENGINE, "k", raw, 7L);
            JsonNode json = MAPPER.readTree(out.value);
            assertEquals(raw, json.get("malformed").asText(), raw);
            assertEquals(ENGINE, json.get("engine").asText());
            assertEquals(7L, json.get("processed_ms").asLong());
            assertEquals(3, json.size());
            assertEquals("k", out.key);
        }
        Enrich.Result nullValue = Enrich.apply(ENGINE, null, null, 7L);
        JsonNode json = MAPPER.readTree(nullValue.value);
        assertTrue(json.has("malformed"));
        assertTrue(json.get("malformed").isNull());
        assertNull(nullValue.key);
    }

    @Test
    void existingEngineFieldIsOverwritten() throws Exception {
        JsonNode json = MAPPER.readTree(Enrich.apply(ENGINE, null, "{\"engine\": \"x\", \"msg_id\": 5}", 9L).value);
        assertEquals(ENGINE, json.get("engine").asText());
        assertFalse(json.has("malformed"));
    }
}
