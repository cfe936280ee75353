package streamlab;

import org.apache.spark.sql.api.java.UDF2;

/**
 * {@link Enrich} as a Spark SQL function of the record's key and value: {@code [key, value]} of the output
 * record, with {@code processed_ms} read on the executor when it processes the record, as the other engines'
 * tasks do. Spark's own time functions would give one instant per micro-batch instead.
 */
public final class SparkEnrich implements UDF2<String, String, String[]> {
    private static final long serialVersionUID = 1L;
    static final String ENGINE = "spark";

    @Override
    public String[] call(String key, String value) {
        Enrich.Result out = Enrich.apply(ENGINE, key, value, System.currentTimeMillis());
        return new String[] {out.key, out.value};
    }
}
