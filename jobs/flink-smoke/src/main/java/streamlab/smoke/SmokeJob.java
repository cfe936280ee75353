package streamlab.smoke;

import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/** Sums a bounded sequence per key across all slots, then finishes. Argument: how many numbers. */
public final class SmokeJob {
    private SmokeJob() {}

    public static void main(String[] args) throws Exception {
        long count = args.length > 0 ? Long.parseLong(args[0]) : 1_000_000L;
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        DataStream<Long> sums = env.fromSequence(1, count)
                .keyBy(value -> value % 16)
                .reduce(Long::sum);
        sums.sinkTo(new DiscardingSink<>());
        env.execute("streamlab-smoke");
    }
}
