// Starts codelibs' Elasticsearch cluster runner or OpenSearch runner (es7, os3) with the ingest
// role on every node: the runners give their nodes only the master and data roles, and a
// write to an index with a default or final pipeline then fails with "There are no ingest
// nodes in this cluster". Run by scripts/es-up in Java's source-file mode (no build step):
//   java -cp <runner classpath> IngestRunner.java <runner class> <master role> <runner args…>
// The roles are set through the runner's onBuild hook (its own defaults come after it, only
// where a setting is absent); everything else is the runner's main: build, wait until closed.

import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.Arrays;

public class IngestRunner {
    public static void main(String[] args) throws Exception {
        Class<?> runnerClass = Class.forName(args[0]);
        String masterRole = args[1];
        String[] runnerArgs = Arrays.copyOfRange(args, 2, args.length);
        Object runner = runnerClass.getConstructor().newInstance();
        Class<?> builderInterface = Class.forName(args[0] + "$Builder");
        Object onBuild = Proxy.newProxyInstance(
                builderInterface.getClassLoader(),
                new Class<?>[] {builderInterface},
                (proxy, method, margs) -> {
                    if (!method.getName().equals("build")) {
                        return method.invoke(proxy, margs);
                    }
                    Object settings = margs[1];
                    Method putList = settings.getClass().getMethod("putList", String.class, String[].class);
                    putList.invoke(settings, "node.roles", new String[] {masterRole, "data", "ingest"});
                    return null;
                });
        runnerClass.getMethod("onBuild", builderInterface).invoke(runner, onBuild);
        Method close = runnerClass.getMethod("close");
        Method isClosed = runnerClass.getMethod("isClosed");
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                close.invoke(runner);
            } catch (Exception e) {
                e.printStackTrace();
            }
        }));
        runnerClass.getMethod("build", String[].class).invoke(runner, (Object) runnerArgs);
        while (!(Boolean) isClosed.invoke(runner)) {
            Thread.sleep(5000);
        }
    }
}
