package streamlab;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * The per-record transformation shared (as an identical copy) by the Flink job and the Storm topology.
 *
 * <p>A JSON object keeps every field and gains {@code engine} and {@code processed_ms}. Anything else
 * (invalid JSON, a JSON array/scalar, a null value) is wrapped as {@code {"malformed": <raw>, ...}} so it
 * is forwarded instead of crashing the job or being dropped. The output key is the input key, or
 * {@code str(msg_id)} when the input key is null.
 */
public final class Enrich {
    public static final String ENGINE = "engine";
    public static final String PROCESSED_MS = "processed_ms";
    public static final String MALFORMED = "malformed";

    private static final ObjectMapper MAPPER =
            new ObjectMapper().enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

    private Enrich() {}

    /** Output record: Kafka key (may be null) and JSON value. */
    public static final class Result {
        public final String key;
        public final String value;

        Result(String key, String value) {
            this.key = key;
            this.value = value;
        }
    }

    public static Result apply(String engine, String key, String raw, long processedMs) {
        ObjectNode out = parseObject(raw);
        if (out == null) {
            out = MAPPER.createObjectNode();
            out.put(MALFORMED, raw);
        } else if (key == null) {
            JsonNode msgId = out.get("msg_id");
            if (msgId != null && !msgId.isNull() && msgId.isValueNode()) {
                key = msgId.asText();
            }
        }
        out.put(ENGINE, engine);
        out.put(PROCESSED_MS, processedMs);
        try {
            return new Result(key, MAPPER.writeValueAsString(out));
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot serialise an ObjectNode", e);
        }
    }

    /** The integer msg_id of a JSON object, or null for anything else. */
    static Long msgId(String raw) {
        ObjectNode node = parseObject(raw);
        JsonNode msgId = node == null ? null : node.get("msg_id");
        return msgId != null && msgId.canConvertToLong() && msgId.isIntegralNumber() ? msgId.asLong() : null;
    }

    private static ObjectNode parseObject(String raw) {
        if (raw == null) {
            return null;
        }
        try {
            JsonNode node = MAPPER.readTree(raw);
            return node instanceof ObjectNode ? (ObjectNode) node : null;
        } catch (JsonProcessingException e) {
            return null;
        }
    }
}
