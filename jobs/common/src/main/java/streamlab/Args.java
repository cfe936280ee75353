package streamlab;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/** Minimal {@code --key value} (or {@code --key=value}) parser that rejects unknown and missing options. */
final class Args {
    private final Map<String, String> values = new HashMap<>();

    Args(String[] args, Set<String> known) {
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (!arg.startsWith("--") || arg.length() == 2) {
                throw new IllegalArgumentException("expected --option, got: " + arg);
            }
            String name = arg.substring(2);
            String value;
            int eq = name.indexOf('=');
            if (eq >= 0) {
                value = name.substring(eq + 1);
                name = name.substring(0, eq);
            } else if (i + 1 < args.length) {
                value = args[++i];
            } else {
                throw new IllegalArgumentException("missing value for --" + name);
            }
            if (!known.contains(name)) {
                throw new IllegalArgumentException("unknown option --" + name + " (known: " + known + ")");
            }
            values.put(name, value);
        }
    }

    String required(String name) {
        String value = values.get(name);
        if (value == null || value.isEmpty()) {
            throw new IllegalArgumentException("missing required option --" + name);
        }
        return value;
    }

    String get(String name, String fallback) {
        return values.getOrDefault(name, fallback);
    }

    boolean has(String name) {
        return values.containsKey(name);
    }

    int getInt(String name, int fallback) {
        return has(name) ? Integer.parseInt(values.get(name)) : fallback;
    }

    long getLong(String name, long fallback) {
        return has(name) ? Long.parseLong(values.get(name)) : fallback;
    }
}
