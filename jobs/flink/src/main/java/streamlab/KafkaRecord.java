package streamlab;

import java.util.Objects;

/** A Kafka key/value pair as UTF-8 strings (either may be null). A Flink POJO: public fields, no-arg constructor. */
public class KafkaRecord {
    public String key;
    public String value;

    public KafkaRecord() {}

    public KafkaRecord(String key, String value) {
        this.key = key;
        this.value = value;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof KafkaRecord r && Objects.equals(key, r.key) && Objects.equals(value, r.value);
    }

    @Override
    public int hashCode() {
        return Objects.hash(key, value);
    }

    @Override
    public String toString() {
        return "KafkaRecord{key=" + key + ", value=" + value + "}";
    }
}
